package zkop.interop;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.TreeSet;

/**
 * Loads a .properties file with java.util.Properties, as an application does, and prints its entries as one JSON
 * object: {"stream": {...}, "reader": {...}} (load(InputStream), ISO-8859-1; load(Reader), UTF-8).
 */
public final class PropertiesLoad {
    private PropertiesLoad() {
    }

    private static ObjectNode entries(Properties properties) {
        ObjectNode node = Json.object();
        for (String key : new TreeSet<>(properties.stringPropertyNames())) {
            node.put(key, properties.getProperty(key));
        }
        return node;
    }

    public static void main(String[] args) throws Exception {
        Properties fromStream = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            fromStream.load(in);
        }
        Properties fromReader = new Properties();
        try (Reader in = new InputStreamReader(new FileInputStream(args[0]), StandardCharsets.UTF_8)) {
            fromReader.load(in);
        }
        ObjectNode out = Json.object();
        out.set("stream", entries(fromStream));
        out.set("reader", entries(fromReader));
        Json.print(out);
    }
}
