package zkop.interop;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.dubbo.common.URL;
import org.apache.dubbo.registry.Registry;
import org.apache.dubbo.registry.RegistryFactory;
import org.apache.dubbo.rpc.model.ApplicationModel;

/**
 * A Dubbo 3 consumer's discovery, with Dubbo's own ZooKeeper registry: {@code RegistryFactory} "zookeeper" gives the
 * {@code ZookeeperRegistry} a {@code ReferenceConfig} subscribes with, and this program subscribes to the providers
 * of one interface exactly as a consumer does (Dubbo matches each provider URL to the consumer URL: interface,
 * category, {@code enabled}, group and version, {@code UrlUtils.isMatch}).
 *
 * <p>Usage: {@code DubboConsumer <zookeeper host:port> <interface> <version|-> <group|->}; prints
 * {@code {"ready": true}} once subscribed; then commands on stdin: {@code providers} — the provider URLs notified last
 * ({@code address}, {@code protocol} and every parameter); {@code close} — unsubscribe and exit.
 */
public final class DubboConsumer {
    private DubboConsumer() {
    }

    public static void main(String[] args) throws Exception {
        ApplicationModel model = ApplicationModel.defaultModel();
        RegistryFactory factory = model.getExtensionLoader(RegistryFactory.class).getExtension("zookeeper");
        URL registryUrl = URL.valueOf("zookeeper://" + args[0]
                + "/org.apache.dubbo.registry.RegistryService?interface=org.apache.dubbo.registry.RegistryService"
                + "&application=zkop-interop-consumer").setScopeModel(model);
        Registry registry = factory.getRegistry(registryUrl);
        StringBuilder query = new StringBuilder("interface=").append(args[1])
                .append("&category=providers&side=consumer&check=false&application=zkop-interop-consumer");
        if (!"-".equals(args[2])) {
            query.append("&version=").append(args[2]);
        }
        if (!"-".equals(args[3])) {
            query.append("&group=").append(args[3]);
        }
        URL consumer = URL.valueOf("consumer://127.0.0.1/" + args[1] + "?" + query).setScopeModel(model);
        AtomicReference<List<URL>> notified = new AtomicReference<>(new ArrayList<>());
        registry.subscribe(consumer, urls -> notified.set(new ArrayList<>(urls)));
        ObjectNode ready = Json.object();
        ready.put("ready", true);
        Json.print(ready);
        Commands.serve(words -> {
            switch (words[0]) {
                case "providers": {
                    ArrayNode list = Json.MAPPER.createArrayNode();
                    for (URL url : notified.get()) {
                        if ("empty".equals(url.getProtocol())) {
                            continue;
                        }
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
        registry.unsubscribe(consumer, urls -> { });
        registry.destroy();
        System.exit(0);
    }
}
