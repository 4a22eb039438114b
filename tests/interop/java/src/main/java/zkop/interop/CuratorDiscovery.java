package zkop.interop;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceInstanceBuilder;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.springframework.cloud.zookeeper.discovery.ZookeeperInstance;

/**
 * An application using Apache Curator's service discovery (curator-x-discovery) exactly as its documentation shows:
 * one CuratorFramework session, a ServiceDiscovery per base path built with ServiceDiscoveryBuilder and Curator's
 * default JsonInstanceSerializer, ServiceCaches for watching.
 *
 * <p>Usage: {@code CuratorDiscovery <connect string, chroot allowed>}; then commands on stdin, one JSON reply each:
 * <ul>
 *   <li>{@code query BASE} — queryForNames, then queryForInstances of each name;</li>
 *   <li>{@code watch BASE NAME} — start a ServiceCache of NAME; {@code cached BASE NAME} — its instances now;</li>
 *   <li>{@code provider BASE NAME} — start a ServiceProvider of NAME that drops disabled instances (the documented
 *       {@code additionalFilter(ServiceInstance::isEnabled)}); {@code usable BASE NAME} — the instances it offers now;</li>
 *   <li>{@code register BASE NAME ID ADDRESS PORT SSLPORT|- [KEY=VALUE...]} — registerService of a DYNAMIC
 *       (ephemeral) instance whose payload is Spring Cloud Zookeeper's ZookeeperInstance with that metadata;</li>
 *   <li>{@code close} — close everything (the session ends, ZooKeeper deletes its ephemeral nodes) and exit.</li>
 * </ul>
 * The payload class of every ServiceDiscovery is Object: Curator's serializer reads the payload's {@code @class},
 * so the reader needs that class on its classpath (here ZookeeperInstance, the class zkop's bridge names).
 */
public final class CuratorDiscovery {
    private final CuratorFramework client;
    private final Map<String, ServiceDiscovery<Object>> discoveries = new HashMap<>();
    private final Map<String, ServiceCache<Object>> caches = new HashMap<>();
    private final Map<String, ServiceProvider<Object>> providers = new HashMap<>();

    private CuratorDiscovery(CuratorFramework client) {
        this.client = client;
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 30000, 10000,
                new ExponentialBackoffRetry(200, 10));
        client.start();
        if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no ZooKeeper connection to " + args[0]);
        }
        CuratorDiscovery app = new CuratorDiscovery(client);
        ObjectNode ready = Json.object();
        ready.put("ready", true);
        Json.print(ready);
        try {
            Commands.serve(app::handle);
        } finally {
            app.close();
        }
        System.exit(0);
    }

    private ServiceDiscovery<Object> discovery(String base) throws Exception {
        ServiceDiscovery<Object> found = discoveries.get(base);
        if (found == null) {
            found = ServiceDiscoveryBuilder.builder(Object.class).client(client).basePath(base).build();
            found.start();
            discoveries.put(base, found);
        }
        return found;
    }

    private Object handle(String[] words) {
        try {
            switch (words[0]) {
                case "query":
                    return query(words[1]);
                case "watch": {
                    ServiceCache<Object> cache = discovery(words[1]).serviceCacheBuilder().name(words[2]).build();
                    cache.start();
                    caches.put(words[1] + "|" + words[2], cache);
                    return Json.object().put("watching", words[2]);
                }
                case "cached": {
                    ArrayNode list = Json.MAPPER.createArrayNode();
                    for (ServiceInstance<Object> instance : caches.get(words[1] + "|" + words[2]).getInstances()) {
                        list.add(describe(instance));
                    }
                    return list;
                }
                case "provider": {
                    ServiceProvider<Object> provider = discovery(words[1]).serviceProviderBuilder()
                            .serviceName(words[2]).additionalFilter(ServiceInstance::isEnabled).build();
                    provider.start();
                    providers.put(words[1] + "|" + words[2], provider);
                    return Json.object().put("providing", words[2]);
                }
                case "usable": {
                    ArrayNode list = Json.MAPPER.createArrayNode();
                    for (ServiceInstance<Object> instance : providers.get(words[1] + "|" + words[2]).getAllInstances()) {
                        list.add(describe(instance));
                    }
                    return list;
                }
                case "register":
                    return register(words);
                case "close":
                    close();
                    return null;
                default:
                    throw new IllegalArgumentException("unknown command " + words[0]);
            }
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    private ObjectNode query(String base) throws Exception {
        ServiceDiscovery<Object> discovery = discovery(base);
        ObjectNode services = Json.object();
        for (String name : new java.util.TreeSet<>(discovery.queryForNames())) {
            ArrayNode list = services.putArray(name);
            for (ServiceInstance<Object> instance : discovery.queryForInstances(name)) {
                list.add(describe(instance));
            }
        }
        return services;
    }

    private ObjectNode register(String[] words) throws Exception {
        Map<String, String> metadata = new LinkedHashMap<>();
        for (String pair : Commands.rest(words, 7)) {
            int eq = pair.indexOf('=');
            metadata.put(pair.substring(0, eq), pair.substring(eq + 1));
        }
        ServiceInstanceBuilder<Object> builder = ServiceInstance.builder()
                .name(words[2]).id(words[3]).address(words[4]).port(Integer.parseInt(words[5]))
                .serviceType(ServiceType.DYNAMIC)
                .uriSpec(new UriSpec("{scheme}://{address}:{port}"))
                .payload(new ZookeeperInstance(words[3], words[2], metadata));
        if (!"-".equals(words[6])) {
            builder.sslPort(Integer.parseInt(words[6]));
        }
        ServiceInstance<Object> instance = builder.build();
        discovery(words[1]).registerService(instance);
        return describe(instance);
    }

    private static ObjectNode describe(ServiceInstance<Object> instance) {
        ObjectNode node = Json.object();
        node.put("name", instance.getName());
        node.put("id", instance.getId());
        node.put("address", instance.getAddress());
        node.put("port", instance.getPort());
        node.put("sslPort", instance.getSslPort());
        node.put("serviceType", String.valueOf(instance.getServiceType()));
        node.put("enabled", instance.isEnabled());
        node.put("registrationTimeUTC", instance.getRegistrationTimeUTC());
        Object payload = instance.getPayload();
        node.put("payloadClass", payload == null ? null : payload.getClass().getName());
        if (payload instanceof ZookeeperInstance) {
            ZookeeperInstance zi = (ZookeeperInstance) payload;
            ObjectNode p = node.putObject("payload");
            p.put("id", zi.getId());
            p.put("name", zi.getName());
            ObjectNode metadata = p.putObject("metadata");
            new TreeMap<>(zi.getMetadata()).forEach(metadata::put);
        }
        node.put("uri", instance.getUriSpec() == null ? null : instance.buildUriSpec());
        if (instance.getUriSpec() != null) {
            Map<String, Object> https = new HashMap<>();
            https.put(UriSpec.FIELD_SCHEME, "https");
            https.put(UriSpec.FIELD_PORT, instance.getSslPort());
            node.put("httpsUri", instance.getSslPort() == null ? null : instance.buildUriSpec(https));
        }
        return node;
    }

    private void close() {
        for (ServiceProvider<Object> provider : providers.values()) {
            try {
                provider.close();
            } catch (Exception ignored) {
                // closing anyway
            }
        }
        providers.clear();
        for (ServiceCache<Object> cache : caches.values()) {
            try {
                cache.close();
            } catch (Exception ignored) {
                // closing anyway
            }
        }
        caches.clear();
        for (ServiceDiscovery<Object> discovery : discoveries.values()) {
            try {
                discovery.close();
            } catch (Exception ignored) {
                // closing anyway
            }
        }
        discoveries.clear();
        client.close();
    }

}
