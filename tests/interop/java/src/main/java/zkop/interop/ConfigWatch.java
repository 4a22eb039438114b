package zkop.interop;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * The legacy application: it reads its feature flags, switches and routing rules from ZooKeeper through Apache
 * Curator's {@code CuratorCache} (curator-recipes), one cache per znode it uses, and reacts to every event.
 *
 * <p>Usage: {@code ConfigWatch <connect string, chroot allowed> <path>...}. Prints {@code {"ready": true}} once every
 * cache has been initialised, then one line per event the caches deliver:
 * {@code {"event": "NODE_CREATED|NODE_CHANGED|NODE_DELETED", "path", "data" (UTF-8), "version", "mzxid"}}.
 * {@code close} on stdin closes the caches and the client.
 */
public final class ConfigWatch {
    private ConfigWatch() {
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 30000, 10000,
                new ExponentialBackoffRetry(200, 10));
        client.start();
        if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no ZooKeeper connection to " + args[0]);
        }
        List<CuratorCache> caches = new ArrayList<>();
        java.util.concurrent.CountDownLatch initialized = new java.util.concurrent.CountDownLatch(args.length - 1);
        for (int i = 1; i < args.length; i++) {
            CuratorCache cache = CuratorCache.build(client, args[i]);
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forAll((type, oldData, data) -> Json.print(event(type.name(), type == CuratorCacheListener.Type
                            .NODE_DELETED ? oldData : data)))
                    .forInitialized(initialized::countDown)
                    .build());
            cache.start();
            caches.add(cache);
        }
        if (!initialized.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the caches did not initialise");
        }
        ObjectNode ready = Json.object();
        ready.put("ready", true);
        Json.print(ready);
        Commands.serve(words -> {
            if ("close".equals(words[0])) {
                return null;
            }
            return Json.error(new IllegalArgumentException("unknown command " + words[0]));
        });
        caches.forEach(CuratorCache::close);
        client.close();
        System.exit(0);
    }

    private static ObjectNode event(String type, ChildData data) {
        ObjectNode node = Json.object();
        node.put("event", type);
        node.put("path", data.getPath());
        node.put("data", data.getData() == null ? null : new String(data.getData(), StandardCharsets.UTF_8));
        node.put("version", data.getStat().getVersion());
        node.put("mzxid", data.getStat().getMzxid());
        return node;
    }
}
