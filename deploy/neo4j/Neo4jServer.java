// A real Neo4j 5.26 Community server for local development and tests: the embedded
// DatabaseManagementService with its Bolt connector on a loopback address.
//
// Usage: java [jvm flags] -cp 'lib/*:classes' Neo4jServer HOME HOST:PORT [PAGECACHE_BYTES] [AUTH true|false] [PASSWORD_FILE]
//   (or, without javac: java -cp 'lib/*' Neo4jServer.java HOME HOST:PORT ...)
//
// HOME holds data/ (the store and transaction logs) and logs/; it persists across restarts.
// With AUTH true and a PASSWORD_FILE (one line, the password; never on the command line), the
// password is handed to `neo4j-admin dbms set-initial-password` -- run in this process, so it
// shows up in no process list -- before the DBMS starts: it writes data/dbms/auth.ini (a salted
// hash), which Neo4j applies to the user `neo4j` as long as that user still has the default
// password `neo4j`: on a new store, and on a store that ran with auth disabled (Neo4j creates the
// default user either way). Once the user has another password the file changes nothing.
// Only one process may use a HOME at a time (Neo4j takes a store lock).
// Started and stopped by deploy/services (SIGTERM -> shutdown hook -> clean store shutdown).
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.CountDownLatch;

import org.neo4j.cli.ExecutionContext;
import org.neo4j.commandline.admin.security.SetInitialPasswordCommand;
import picocli.CommandLine;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

public final class Neo4jServer {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Neo4jServer HOME HOST:PORT [PAGECACHE_BYTES] [AUTH true|false] [PASSWORD_FILE]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int colon = args[1].lastIndexOf(':');
        SocketAddress bolt = new SocketAddress(args[1].substring(0, colon), Integer.parseInt(args[1].substring(colon + 1)));
        long pagecache = args.length > 2 ? Long.parseLong(args[2]) : 256L * 1024 * 1024;
        boolean auth = args.length > 3 && Boolean.parseBoolean(args[3]);
        if (args.length > 4) {
            if (!auth) {
                System.err.println("Neo4jServer: a PASSWORD_FILE needs AUTH true");
                System.exit(2);
            }
            setInitialPassword(home, Path.of(args[4]));
        }

        long t0 = System.nanoTime();
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, bolt)
                .setConfig(BoltConnector.advertised_address, bolt)
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(HttpConnector.enabled, false)
                .setConfig(HttpsConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, auth)
                .setConfig(GraphDatabaseSettings.pagecache_memory, pagecache)
                // Development box: no 256 MiB preallocated transaction log per database.
                .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                .setConfig(GraphDatabaseSettings.logical_log_rotation_threshold, 64L * 1024 * 1024)
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("Neo4jServer: shutting down");
            try {
                dbms.shutdown();
            } finally {
                System.out.println("Neo4jServer: stopped");
                stopped.countDown();
            }
        }, "neo4j-shutdown"));

        System.out.printf("Neo4jServer: started in %d ms, bolt://%s, home=%s, auth=%s, pagecache=%d bytes, databases=%s%n",
                (System.nanoTime() - t0) / 1_000_000, bolt, home, auth, pagecache, dbms.listDatabases());
        System.out.flush();
        stopped.await();
    }

    /** neo4j-admin dbms set-initial-password, in this process, with the password read from a file. */
    private static void setInitialPassword(Path home, Path passwordFile) throws Exception {
        String password = Files.readString(passwordFile, StandardCharsets.UTF_8).strip();
        if (password.isEmpty() || password.contains("\n")) {
            System.err.println("Neo4jServer: password file " + passwordFile + " must hold one non-empty line");
            System.exit(2);
        }
        // "--" ends the options: a password that begins with '-' (token_urlsafe gives one in 64) is
        // the positional parameter, not an unknown option (picocli's usage error, exit 64)
        int rc = new CommandLine(new SetInitialPasswordCommand(new ExecutionContext(home, home.resolve("conf"))))
                .execute("--", password);
        if (rc != 0) {
            System.err.println("Neo4jServer: set-initial-password failed (exit " + rc + ")");
            System.exit(2);
        }
        Path authIni = home.resolve("data").resolve("dbms").resolve("auth.ini");
        if (Files.exists(authIni)) {
            Files.setPosixFilePermissions(authIni, PosixFilePermissions.fromString("rw-------"));
        }
    }
}
