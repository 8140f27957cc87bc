// Starts Apache Iceberg's REST catalog test server, bound to 127.0.0.1 only.
//
// Iceberg 1.10's own entry point, org.apache.iceberg.rest.RESTCatalogServer (in
// iceberg-open-api's test-fixtures jar), builds its Jetty server with
// `new Server(port)`, which listens on every interface, and has no host setting. This
// launcher wires the same pieces (a backing catalog built by CatalogUtil, wrapped in
// Iceberg's RESTCatalogAdapter and RESTCatalogServlet, behind a GzipHandler) onto a
// Jetty connector whose host is fixed to 127.0.0.1, so it never listens elsewhere.
//
// Configuration is RESTCatalogServer's: environment variables CATALOG_<NAME> become
// catalog properties, lowercased, "__" -> "-", "_" -> "." (CATALOG_URI -> uri,
// CATALOG_IO__IMPL -> io-impl, CATALOG_S3_ENDPOINT -> s3.endpoint), with its defaults
// (catalog-impl JdbcCatalog, uri jdbc:sqlite::memory:, jdbc.schema-version V1,
// catalog.name rest_backend, rest.port 8181). rest.port 0 picks a free port.
//
// Additions of this launcher:
//   ICEBERG_REST_BEARER_TOKEN  when set, every request must carry
//                              "Authorization: Bearer <token>"; others get 401 with an
//                              ErrorModel body (type NotAuthorizedException). Not a
//                              catalog property, so it is never logged.
//   Once listening it prints "iceberg-rest: listening on http://127.0.0.1:<port>" to
//   stdout.
//
// Compiled by scripts/bootstrap against the jars of pom.xml.

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.HandlerWrapper;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class Launcher {
  private static final String HOST = "127.0.0.1";

  private Launcher() {}

  /** CATALOG_FOO__BAR_BAZ=v -> foo-bar.baz=v, as RESTCatalogServer reads them. */
  static Map<String, String> propertiesFromEnvironment(Map<String, String> env) {
    Map<String, String> props = new HashMap<>();
    for (Map.Entry<String, String> e : env.entrySet()) {
      String key = e.getKey();
      if (!key.startsWith("CATALOG_")) {
        continue;
      }
      String name = key.substring("CATALOG_".length())
                        .replace("__", "-")
                        .replace('_', '.')
                        .toLowerCase(Locale.ROOT);
      props.put(name, e.getValue());
    }
    return props;
  }

  /** Answers 401 to any request without the expected bearer token. */
  static final class BearerTokenCheck extends HandlerWrapper {
    private final byte[] expected;

    BearerTokenCheck(String token) {
      this.expected = ("Bearer " + token).getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void handle(String target, Request base, HttpServletRequest request,
        HttpServletResponse response)
        throws IOException, jakarta.servlet.ServletException {
      String got = request.getHeader("Authorization");
      byte[] gotBytes = got == null ? new byte[0] : got.getBytes(StandardCharsets.UTF_8);
      if (MessageDigest.isEqual(expected, gotBytes)) {
        super.handle(target, base, request, response);
        return;
      }
      base.setHandled(true);
      response.setStatus(401);
      response.setContentType("application/json");
      response.getWriter().write(
          "{\"error\":{\"message\":\"missing or wrong bearer token\","
          + "\"type\":\"NotAuthorizedException\",\"code\":401}}");
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> props = propertiesFromEnvironment(System.getenv());
    props.putIfAbsent(
        CatalogProperties.CATALOG_IMPL, "org.apache.iceberg.jdbc.JdbcCatalog");
    props.putIfAbsent(CatalogProperties.URI, "jdbc:sqlite::memory:");
    props.putIfAbsent("jdbc.schema-version", "V1");
    if (!props.containsKey(CatalogProperties.WAREHOUSE_LOCATION)) {
      String tmp =
          Files.createTempDirectory("iceberg_warehouse").toAbsolutePath().toString();
      props.put(CatalogProperties.WAREHOUSE_LOCATION, tmp);
    }
    String name = props.getOrDefault("catalog.name", "rest_backend");
    int port = Integer.parseInt(props.getOrDefault("rest.port", "8181"));

    // Names only: values may hold secrets (s3.secret-access-key).
    System.err.println("iceberg-rest: catalog " + name + " with properties "
        + new TreeSet<>(props.keySet()));
    // No Hadoop Configuration: neither JdbcCatalog nor S3FileIO needs one.
    Catalog catalog = CatalogUtil.buildIcebergCatalog(name, props, null);

    ServletContextHandler context =
        new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(
        new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    context.insertHandler(new GzipHandler());

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(HOST);
    connector.setPort(port);
    server.addConnector(connector);

    String token = System.getenv("ICEBERG_REST_BEARER_TOKEN");
    if (token != null && !token.isEmpty()) {
      BearerTokenCheck check = new BearerTokenCheck(token);
      check.setHandler(context);
      server.setHandler(check);
    } else {
      server.setHandler(context);
    }
    server.setStopAtShutdown(true);
    server.start();

    System.out.println(
        "iceberg-rest: listening on http://" + HOST + ":" + connector.getLocalPort());
    System.out.flush();
    server.join();
    if (catalog instanceof AutoCloseable) {
      ((AutoCloseable) catalog).close();
    }
  }
}
