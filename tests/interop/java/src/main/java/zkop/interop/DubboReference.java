package zkop.interop;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.TreeMap;
import org.apache.dubbo.common.URL;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.cluster.ClusterInvoker;
import zkop.interop.dubbo.Greeter;

/**
 * A Dubbo 3 consumer as an application runs one: {@code DubboBootstrap} referring to {@link Greeter} through a
 * {@code zookeeper://} registry, with one of Dubbo's migration steps, so that it reads one registration model only:
 * <ul>
 * <li>{@code FORCE_APPLICATION} (registry URL with {@code registry-type=service}): application-level discovery.
 * Dubbo reads the interface → application mapping ({@code /dubbo/mapping/<interface>}), the application's instances
 * ({@code /services/<application>}) and, for each instance's revision, its metadata
 * ({@code /dubbo/metadata/<application>/<revision>}), and builds one invoker per address;</li>
 * <li>{@code FORCE_INTERFACE}: interface-level discovery, the provider URLs under
 * {@code /dubbo/<interface>/providers}, as Dubbo 2 and 3's default registration.</li>
 * </ul>
 * The reference is {@code lazy}: no connection is made to an address until a call goes to it, so a test may publish
 * addresses nothing serves as long as it calls none.
 *
 * <p>Usage: {@code DubboReference <zookeeper host:port> <version|-> [FORCE_APPLICATION|FORCE_INTERFACE]} (the step
 * defaults to {@code FORCE_APPLICATION}); prints {@code {"ready": true}} once the reference is made; then commands
 * on stdin: {@code providers} — the invokers' URLs ({@code address}, {@code protocol} and every parameter);
 * {@code greet <name>} — call {@code Greeter.greet(name)} through the reference (Dubbo's cluster invoker picks a
 * provider it discovered) and print {@code {"reply": <its answer>}} (a failed call prints {@code {"error": …}});
 * {@code close} — stop Dubbo and exit.
 */
public final class DubboReference {
    /** How long one call may take, in milliseconds (Dubbo's default, 1 s, is short for a cold JVM's first call). */
    private static final int CALL_TIMEOUT_MS = 30_000;

    private DubboReference() {
    }

    public static void main(String[] args) throws Exception {
        String step = args.length > 2 ? args[2] : "FORCE_APPLICATION";
        if (!"FORCE_APPLICATION".equals(step) && !"FORCE_INTERFACE".equals(step)) {
            throw new IllegalArgumentException("unknown migration step " + step);
        }
        System.setProperty("dubbo.application.service-discovery.migration", step);
        ApplicationConfig application = new ApplicationConfig("zkop-interop-consumer");
        application.setQosEnable(false);
        String registryAddress = "zookeeper://" + args[0];
        if ("FORCE_APPLICATION".equals(step)) {
            registryAddress += "?registry-type=service";
        }
        RegistryConfig registry = new RegistryConfig(registryAddress);
        ReferenceConfig<Greeter> reference = new ReferenceConfig<>();
        reference.setInterface(Greeter.class);
        reference.setCheck(false);
        reference.setLazy(true);
        reference.setTimeout(CALL_TIMEOUT_MS);
        reference.setRetries(0);
        if (!"-".equals(args[1])) {
            reference.setVersion(args[1]);
        }
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application).registry(registry).reference(reference);
        bootstrap.start();
        Greeter greeter = reference.get();
        ClusterInvoker<?> invoker = (ClusterInvoker<?>) reference.getInvoker();
        ObjectNode ready = Json.object();
        ready.put("ready", true);
        Json.print(ready);
        Commands.serve(words -> {
            switch (words[0]) {
                case "providers": {
                    ArrayNode list = Json.MAPPER.createArrayNode();
                    List<? extends Invoker<?>> invokers = invoker.getDirectory().getAllInvokers();
                    for (Invoker<?> each : invokers) {
                        URL url = each.getUrl();
                        ObjectNode node = list.addObject();
                        node.put("address", url.getAddress());
                        node.put("protocol", url.getProtocol());
                        ObjectNode params = node.putObject("parameters");
                        new TreeMap<>(url.getParameters()).forEach(params::put);
                    }
                    return list;
                }
                case "greet": {
                    ObjectNode reply = Json.object();
                    reply.put("reply", greeter.greet(words[1]));
                    return reply;
                }
                case "close":
                    return null;
                default:
                    return Json.error(new IllegalArgumentException("unknown command " + words[0]));
            }
        });
        bootstrap.stop();
        System.exit(0);
    }
}
