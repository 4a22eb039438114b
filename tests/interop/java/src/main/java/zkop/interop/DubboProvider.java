package zkop.interop;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import zkop.interop.dubbo.Greeter;

/**
 * A Dubbo 3 provider as an application runs one: {@code DubboBootstrap} exporting {@link Greeter} over the
 * {@code dubbo} protocol and registering it with Dubbo's own ZooKeeper registry.
 *
 * <p>Usage: {@code DubboProvider <zookeeper host:port|-> <application> <register mode: interface|instance|all>
 * <protocol port> [<version>]}; the address registered is the environment's {@code DUBBO_IP_TO_REGISTRY} (Dubbo's own
 * setting for a provider behind NAT), the server binds {@code DUBBO_IP_TO_BIND}. With {@code -} for the ZooKeeper
 * address the provider registers nowhere (Dubbo's {@code N/A} registry: it only serves), as a provider a platform
 * publishes for it. {@code greet(name)} answers {@code "hello " + name}. Prints {@code {"ready": true}} once
 * exported; {@code close} on stdin stops Dubbo (unregistering, closing its server) and exits.
 */
public final class DubboProvider {
    private DubboProvider() {
    }

    public static void main(String[] args) throws Exception {
        ApplicationConfig application = new ApplicationConfig(args[1]);
        application.setRegisterMode(args[2]);
        application.setQosEnable(false);
        RegistryConfig registry = new RegistryConfig("-".equals(args[0]) ? RegistryConfig.NO_AVAILABLE
                : "zookeeper://" + args[0]);
        ProtocolConfig protocol = new ProtocolConfig("dubbo", Integer.parseInt(args[3]));
        ServiceConfig<Greeter> service = new ServiceConfig<>();
        service.setInterface(Greeter.class);
        service.setRef(name -> "hello " + name);
        if (args.length > 4) {
            service.setVersion(args[4]);
        }
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application).registry(registry).protocol(protocol).service(service);
        bootstrap.start();
        ObjectNode ready = Json.object();
        ready.put("ready", true);
        Json.print(ready);
        Commands.serve(words -> {
            if ("close".equals(words[0])) {
                return null;
            }
            return Json.error(new IllegalArgumentException("unknown command " + words[0]));
        });
        bootstrap.stop();
        System.exit(0);
    }
}
