package zkop.interop;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/** One JSON document per line on stdout, the only thing these programs print there (logs go to stderr). */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out),
            true, StandardCharsets.UTF_8);

    private Json() {
    }

    static ObjectNode object() {
        return MAPPER.createObjectNode();
    }

    static synchronized void print(Object value) {
        try {
            OUT.println(MAPPER.writeValueAsString(value));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static ObjectNode error(Throwable e) {
        ObjectNode node = object();
        node.put("error", e.getClass().getName() + ": " + e.getMessage());
        return node;
    }
}
