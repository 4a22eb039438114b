package zkop.interop.springconfig;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.context.config.annotation.RefreshScope;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.stereotype.Component;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Boot web application that reads its configuration from ZooKeeper with Spring Cloud Zookeeper Config
 * ({@code --spring.config.import=zookeeper:}, {@code --spring.application.name=APP}: the znodes under
 * {@code /config/APP}, a znode {@code /config/APP/shop/greeting} being the property {@code shop.greeting}), and
 * keeps it live: Spring Cloud Zookeeper Config's {@code ConfigWatcher} (a Curator {@code TreeCache} on each
 * context, {@code spring.cloud.zookeeper.config.watcher.enabled}, on by default) publishes a {@code RefreshEvent}
 * on every change, and Spring Cloud's {@code ContextRefresher} rebinds {@code @ConfigurationProperties} and renews
 * {@code @RefreshScope} beans.
 *
 * <p>{@code GET /config} answers {@code {"properties": shop.greeting as the @ConfigurationProperties bean holds it,
 * "refreshScope": as a @RefreshScope bean's @Value holds it}}; {@code GET /settings} the map {@code shop.settings.*}
 * as the @ConfigurationProperties bean holds it (the whole property set of a ZooKeeperConfigTree). Prints {@code {"ready": true}} once started, then
 * answers commands on stdin, one JSON line each: {@code port} (the web server's port) and {@code close}.
 */
@SpringBootApplication
@EnableConfigurationProperties(SpringConfigApp.ShopProperties.class)
public class SpringConfigApp {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true,
            StandardCharsets.UTF_8);

    /** {@code shop.*}: rebound in place on a refresh. */
    @ConfigurationProperties("shop")
    public static class ShopProperties {
        private String greeting = "unset";
        private Map<String, String> settings = new LinkedHashMap<>();

        public Map<String, String> getSettings() {
            return settings;
        }

        public void setSettings(Map<String, String> settings) {
            this.settings = settings;
        }

        public String getGreeting() {
            return greeting;
        }

        public void setGreeting(String greeting) {
            this.greeting = greeting;
        }
    }

    /** A bean made again after a refresh, with the value its {@code @Value} reads then. */
    @Component
    @RefreshScope
    public static class Greeter {
        private final String greeting;

        public Greeter(@Value("${shop.greeting:unset}") String greeting) {
            this.greeting = greeting;
        }

        public String greeting() {
            return greeting;
        }
    }

    /** The values the application uses now. */
    @RestController
    public static class ConfigController {
        private final ShopProperties properties;
        private final Greeter greeter;

        public ConfigController(ShopProperties properties, Greeter greeter) {
            this.properties = properties;
            this.greeter = greeter;
        }

        @GetMapping("/config")
        public Map<String, String> config() {
            Map<String, String> values = new LinkedHashMap<>();
            values.put("properties", properties.getGreeting());
            values.put("refreshScope", greeter.greeting());
            return values;
        }

        @GetMapping("/settings")
        public Map<String, String> settings() {
            return new LinkedHashMap<>(properties.getSettings());
        }
    }

    public static void main(String[] args) throws Exception {
        ConfigurableApplicationContext context = SpringApplication.run(SpringConfigApp.class, args);
        print(MAPPER.createObjectNode().put("ready", true));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String command = line.trim();
            if (command.equals("close")) {
                break;
            } else if (command.equals("port")) {
                print(MAPPER.createObjectNode().put("port",
                        Integer.parseInt(context.getEnvironment().getProperty("local.server.port", "-1"))));
            } else {
                print(MAPPER.createObjectNode().put("error", "unknown command " + command));
            }
        }
        context.close();
        System.exit(0);
    }

    private static synchronized void print(Object value) throws Exception {
        OUT.println(MAPPER.writeValueAsString(value));
    }
}
