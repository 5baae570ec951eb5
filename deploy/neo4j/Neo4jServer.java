// A real Neo4j 5.26 Community server for local development and tests: the embedded
// DatabaseManagementService with its Bolt connector on a loopback address.
//
// Usage: java [jvm flags] -cp 'lib/*:classes' Neo4jServer HOME HOST:PORT [PAGECACHE_BYTES] [AUTH true|false]
//   (or, without javac: java -cp 'lib/*' Neo4jServer.java HOME HOST:PORT ...)
//
// HOME holds data/ (the store and transaction logs) and logs/; it persists across restarts.
// Only one process may use a HOME at a time (Neo4j takes a store lock).
// Started and stopped by deploy/services (SIGTERM -> shutdown hook -> clean store shutdown).
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

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
            System.err.println("usage: Neo4jServer HOME HOST:PORT [PAGECACHE_BYTES] [AUTH true|false]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int colon = args[1].lastIndexOf(':');
        SocketAddress bolt = new SocketAddress(args[1].substring(0, colon), Integer.parseInt(args[1].substring(colon + 1)));
        long pagecache = args.length > 2 ? Long.parseLong(args[2]) : 256L * 1024 * 1024;
        boolean auth = args.length > 3 && Boolean.parseBoolean(args[3]);

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
}
