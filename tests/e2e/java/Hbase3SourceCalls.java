// What an HBase 3.0 replication source asks its peer cluster before it replicates (hbase-server 3.0.0,
// HBaseReplicationEndpoint), asked here with the real HBase 2.6.4 client against a cdcflow peer:
//   connect through the connection registry the cluster key names (ZooKeeper, or RPC bootstrap nodes),
//   getClusterMetrics(CLUSTER_ID) for the peer's id, getRegionServers(true) for its sinks
//   (GetClusterStatus with SERVERS_NAME, minus ListDecommissionedRegionServers).
// Run as a single-file program: java -cp <HBase 2.6.4 jars> Hbase3SourceCalls.java zk <quorum> <parent>
//                                                                          rpc <host:port,...>
// Prints "cluster_id <uuid>" and one "sink <host> <port> <startcode>" line per server.
import java.util.EnumSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.ClusterMetrics;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.client.AsyncAdmin;
import org.apache.hadoop.hbase.client.AsyncConnection;
import org.apache.hadoop.hbase.client.ConnectionFactory;

public class Hbase3SourceCalls {
  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    if (args[0].equals("zk")) {
      conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.ZKConnectionRegistry");
      conf.set("hbase.zookeeper.quorum", args[1]);
      conf.set("zookeeper.znode.parent", args[2]);
    } else {
      conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
      conf.set("hbase.client.bootstrap.servers", args[1]);
    }
    conf.setInt("hbase.client.retries.number", 3);
    conf.setInt("hbase.rpc.timeout", 10000);
    conf.setInt("hbase.client.operation.timeout", 30000);
    try (AsyncConnection connection = ConnectionFactory.createAsyncConnection(conf).get()) {
      AsyncAdmin admin = connection.getAdmin();
      ClusterMetrics metrics = admin.getClusterMetrics(EnumSet.of(ClusterMetrics.Option.CLUSTER_ID)).get();
      System.out.println("cluster_id " + metrics.getClusterId());
      for (ServerName sink : admin.getRegionServers(true).get()) {
        System.out.println("sink " + sink.getHostname() + " " + sink.getPort() + " " + sink.getStartcode());
      }
    }
  }
}
