package zkop.interop.spring;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.discovery.DiscoveryClient;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A Spring Boot web application with Spring Cloud Zookeeper discovery, configured only through Spring properties
 * given as arguments ({@code --spring.cloud.zookeeper.connect-string=…}, {@code --spring.application.name=…},
 * {@code --spring.cloud.zookeeper.discovery.*}). With {@code register=true} (the default) Spring Cloud Zookeeper's
 * auto-registration registers it when the web server has started; its {@code DiscoveryClient} reads the root.
 *
 * <p>Prints {@code {"ready": true}} once started, then answers commands on stdin, one JSON line each:
 * {@code services} ({@code DiscoveryClient.getServices()}), {@code instances ID} ({@code getInstances(ID)}:
 * serviceId, instanceId, host, port, secure, uri, metadata) and {@code close} (closes the context: deregisters).
 */
@SpringBootApplication
public class SpringZookeeperApp {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true,
            StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        SpringApplication application = new SpringApplication(SpringZookeeperApp.class);
        application.setDefaultProperties(Map.of("spring.cloud.zookeeper.config.enabled", "false"));
        ConfigurableApplicationContext context = application.run(args);
        DiscoveryClient discovery = context.getBean(DiscoveryClient.class);
        print(MAPPER.createObjectNode().put("ready", true));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("close")) {
                break;
            }
            try {
                if (words[0].equals("services")) {
                    ArrayNode names = MAPPER.createArrayNode();
                    new TreeSet<>(discovery.getServices()).forEach(names::add);
                    print(names);
                } else if (words[0].equals("instances")) {
                    ArrayNode list = MAPPER.createArrayNode();
                    for (ServiceInstance instance : discovery.getInstances(words[1])) {
                        ObjectNode node = list.addObject();
                        node.put("serviceId", instance.getServiceId());
                        node.put("instanceId", instance.getInstanceId());
                        node.put("host", instance.getHost());
                        node.put("port", instance.getPort());
                        node.put("secure", instance.isSecure());
                        node.put("uri", String.valueOf(instance.getUri()));
                        ObjectNode metadata = node.putObject("metadata");
                        new TreeMap<>(instance.getMetadata()).forEach(metadata::put);
                    }
                    print(list);
                } else {
                    print(MAPPER.createObjectNode().put("error", "unknown command " + words[0]));
                }
            } catch (RuntimeException e) {
                print(MAPPER.createObjectNode().put("error", e.getClass().getName() + ": " + e.getMessage()));
            }
        }
        context.close();
        System.exit(0);
    }

    private static synchronized void print(Object value) throws Exception {
        OUT.println(MAPPER.writeValueAsString(value));
    }
}
