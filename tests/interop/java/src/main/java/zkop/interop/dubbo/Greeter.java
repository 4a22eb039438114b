package zkop.interop.dubbo;

/** The service interface the Dubbo provider exports (its name is the interface-level registry's node name). */
public interface Greeter {
    String greet(String name);
}
