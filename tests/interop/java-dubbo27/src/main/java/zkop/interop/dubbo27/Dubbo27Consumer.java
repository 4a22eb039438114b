package zkop.interop.dubbo27;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.dubbo.common.URL;
import org.apache.dubbo.common.extension.ExtensionLoader;
import org.apache.dubbo.registry.Registry;
import org.apache.dubbo.registry.RegistryFactory;

/**
 * A Dubbo 2.7 consumer's discovery, with Dubbo 2.7's own ZooKeeper registry: {@code RegistryFactory} "zookeeper" gives
 * the {@code ZookeeperRegistry} a {@code ReferenceConfig} subscribes with, and this program subscribes to the
 * providers of one interface exactly as a consumer does (Dubbo matches each provider URL to the consumer URL:
 * interface, category, {@code enabled}, group and version, {@code UrlUtils.isMatch}).
 *
 * <p>Usage: {@code Dubbo27Consumer <zookeeper host:port> <interface> <version|-> <group|->}; prints
 * {@code {"ready":true}} once subscribed; then commands on stdin: {@code providers} — the provider URLs notified last
 * ({@code address}, {@code protocol} and every parameter); {@code close} — unsubscribe and exit.
 */
public final class Dubbo27Consumer {
    private static final Gson GSON = new Gson();

    private Dubbo27Consumer() {
    }

    public static void main(String[] args) throws Exception {
        RegistryFactory factory = ExtensionLoader.getExtensionLoader(RegistryFactory.class).getExtension("zookeeper");
        Registry registry = factory.getRegistry(URL.valueOf("zookeeper://" + args[0]
                + "/org.apache.dubbo.registry.RegistryService?interface=org.apache.dubbo.registry.RegistryService"
                + "&application=zkop-interop-dubbo27-consumer"));
        StringBuilder query = new StringBuilder("interface=").append(args[1])
                .append("&category=providers&side=consumer&check=false&application=zkop-interop-dubbo27-consumer");
        if (!"-".equals(args[2])) {
            query.append("&version=").append(args[2]);
        }
        if (!"-".equals(args[3])) {
            query.append("&group=").append(args[3]);
        }
        URL consumer = URL.valueOf("consumer://127.0.0.1/" + args[1] + "?" + query);
        AtomicReference<List<URL>> notified = new AtomicReference<>(new ArrayList<>());
        registry.subscribe(consumer, urls -> notified.set(new ArrayList<>(urls)));
        JsonObject ready = new JsonObject();
        ready.addProperty("ready", true);
        print(ready);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String command = line.trim();
            if (command.isEmpty()) {
                continue;
            }
            if ("close".equals(command)) {
                break;
            }
            if (!"providers".equals(command)) {
                JsonObject error = new JsonObject();
                error.addProperty("error", "unknown command " + command);
                print(error);
                continue;
            }
            JsonArray list = new JsonArray();
            for (URL url : notified.get()) {
                if ("empty".equals(url.getProtocol())) {
                    continue;
                }
                JsonObject node = new JsonObject();
                node.addProperty("address", url.getAddress());
                node.addProperty("protocol", url.getProtocol());
                JsonObject params = new JsonObject();
                new TreeMap<>(url.getParameters()).forEach(params::addProperty);
                node.add("parameters", params);
                list.add(node);
            }
            print(list);
        }
        registry.unsubscribe(consumer, urls -> { });
        registry.destroy();
        System.exit(0);
    }

    private static void print(Object value) {
        System.out.println(GSON.toJson(value));
        System.out.flush();
    }
}
