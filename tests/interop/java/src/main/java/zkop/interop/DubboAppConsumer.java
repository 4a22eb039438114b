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
 * A Dubbo 3 consumer with application-level service discovery only, as an application runs one: {@code DubboBootstrap}
 * referring to {@link Greeter} through a {@code zookeeper://} registry with {@code registry-type=service} and the
 * migration step {@code FORCE_APPLICATION} (never the interface-level URLs). Dubbo then reads the interface →
 * application mapping ({@code /dubbo/mapping/<interface>}), the application's instances
 * ({@code /services/<application>}) and, for each instance's revision, its metadata
 * ({@code /dubbo/metadata/<application>/<revision>}), and builds one invoker per address; the reference is
 * {@code lazy}, so no connection is made to an address a test cannot serve.
 *
 * <p>Usage: {@code DubboAppConsumer <zookeeper host:port> <version|->}; prints {@code {"ready": true}} once the
 * reference is made; then commands on stdin: {@code providers} — the invokers' URLs ({@code address},
 * {@code protocol} and every parameter); {@code close} — stop Dubbo and exit.
 */
public final class DubboAppConsumer {
    private DubboAppConsumer() {
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("dubbo.application.service-discovery.migration", "FORCE_APPLICATION");
        ApplicationConfig application = new ApplicationConfig("zkop-interop-app-consumer");
        application.setQosEnable(false);
        RegistryConfig registry = new RegistryConfig("zookeeper://" + args[0] + "?registry-type=service");
        ReferenceConfig<Greeter> reference = new ReferenceConfig<>();
        reference.setInterface(Greeter.class);
        reference.setCheck(false);
        reference.setLazy(true);
        if (!"-".equals(args[1])) {
            reference.setVersion(args[1]);
        }
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application).registry(registry).reference(reference);
        bootstrap.start();
        reference.get();
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
