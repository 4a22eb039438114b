package zkop.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.function.Function;

/** Reads whitespace-separated commands from stdin, one a line, and prints one JSON reply for each. */
final class Commands {
    private Commands() {
    }

    /** Runs until stdin closes or a handler returns null (after printing its reply). */
    static void serve(Function<String[], Object> handler) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length == 0 || words[0].isEmpty()) {
                continue;
            }
            Object reply;
            try {
                reply = handler.apply(words);
            } catch (RuntimeException e) {
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                reply = Json.error(cause);
            }
            if (reply == null) {
                return;
            }
            Json.print(reply);
        }
    }

    static String[] rest(String[] words, int from) {
        return Arrays.copyOfRange(words, from, words.length);
    }
}
