package dev.shaledb.ycsb;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.atomic.AtomicInteger;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * A YCSB binding for any server that speaks the Redis protocol (written for ShaleDB's
 * `shale serve`, used the same way against redis-server).
 *
 * <p>Records take the shape YCSB's own Redis binding gives them, so results compare with what
 * users of that binding measure: a record is a hash named by its key with one hash field per
 * YCSB field, and every key is also a member of the sorted set {@value #INDEX} whose score is
 * the key's Java {@code String.hashCode()}; scans walk that sorted set from the start key's
 * score upwards. The table name is ignored, as there.
 *
 * <p>Properties: {@code redis.host} (default localhost), {@code redis.port} (default 6379),
 * {@code redis.password} (sent with AUTH when set) and {@code redis.timeout} (socket timeout in
 * milliseconds, default 2000). YCSB makes one instance per client thread, so each thread has a
 * connection of its own.
 *
 * <p>Unlike the original, a client-side exception (a dropped connection, a timeout, an error
 * reply) is returned to YCSB as {@link Status#ERROR} rather than thrown, so that it is counted
 * in YCSB's Return=ERROR lines instead of ending the client thread; the first few are printed
 * to stderr.
 */
public class ShaleRedisClient extends DB {
  /** The sorted set that indexes every record for scans. */
  public static final String INDEX = "_indices";

  public static final String HOST_PROPERTY = "redis.host";
  public static final String PORT_PROPERTY = "redis.port";
  public static final String PASSWORD_PROPERTY = "redis.password";
  public static final String TIMEOUT_PROPERTY = "redis.timeout";

  private static final int REPORTED_FAILURES = 10;
  private static final AtomicInteger FAILURES = new AtomicInteger();

  private Jedis jedis;

  @Override
  public void init() throws DBException {
    Properties properties = getProperties();
    String host = properties.getProperty(HOST_PROPERTY, "localhost");
    int port = Integer.parseInt(properties.getProperty(PORT_PROPERTY, "6379"));
    int timeout = Integer.parseInt(properties.getProperty(TIMEOUT_PROPERTY, "2000"));
    String password = properties.getProperty(PASSWORD_PROPERTY);
    try {
      jedis = new Jedis(host, port, timeout);
      jedis.connect();
      if (password != null && !password.isEmpty()) {
        jedis.auth(password);
      }
    } catch (JedisException e) {
      throw new DBException("cannot connect to " + host + ":" + port, e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (jedis == null) {
      return;
    }
    try {
      jedis.close();
    } catch (JedisException e) {
      throw new DBException("closing the connection", e);
    } finally {
      jedis = null;
    }
  }

  /** The record's score in {@value #INDEX}. */
  private static double score(String key) {
    return key.hashCode();
  }

  private static Status failed(String operation, String key, JedisException e) {
    if (FAILURES.incrementAndGet() <= REPORTED_FAILURES) {
      System.err.println("ShaleRedisClient: " + operation + " " + key + " failed: " + e);
    }
    return Status.ERROR;
  }

  /** Reads one record into result; NOT_FOUND when none of its fields exist. */
  private Status readInto(String key, Set<String> fields, Map<String, ByteIterator> result) {
    if (fields == null) {
      Map<String, String> all = jedis.hgetAll(key);
      StringByteIterator.putAllAsByteIterators(result, all);
    } else {
      String[] names = fields.toArray(new String[0]);
      List<String> values = jedis.hmget(key, names);
      for (int i = 0; i < names.length; i++) {
        String value = values.get(i);
        if (value != null) {
          result.put(names[i], new StringByteIterator(value));
        }
      }
    }
    return result.isEmpty() ? Status.NOT_FOUND : Status.OK;
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
      Map<String, ByteIterator> result) {
    try {
      return readInto(key, fields, result);
    } catch (JedisException e) {
      return failed("read", key, e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      String reply = jedis.hmset(key, StringByteIterator.getStringMap(values));
      if (!"OK".equals(reply)) {
        return Status.ERROR;
      }
      jedis.zadd(INDEX, score(key), key);
      return Status.OK;
    } catch (JedisException e) {
      return failed("insert", key, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      String reply = jedis.hmset(key, StringByteIterator.getStringMap(values));
      return "OK".equals(reply) ? Status.OK : Status.ERROR;
    } catch (JedisException e) {
      return failed("update", key, e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      long removed = jedis.del(key);
      long unindexed = jedis.zrem(INDEX, key);
      return removed == 0 && unindexed == 0 ? Status.NOT_FOUND : Status.OK;
    } catch (JedisException e) {
      return failed("delete", key, e);
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    try {
      Set<String> keys =
          jedis.zrangeByScore(INDEX, score(startkey), Double.POSITIVE_INFINITY, 0, recordcount);
      for (String key : keys) {
        HashMap<String, ByteIterator> record = new HashMap<>();
        readInto(key, fields, record);
        result.add(record);
      }
      return Status.OK;
    } catch (JedisException e) {
      return failed("scan", startkey, e);
    }
  }
}
