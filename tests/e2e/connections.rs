//! The gateway's door under abuse (issue: one tenant must not hurt the
//! others): idle connections from one address cannot take every slot, a
//! connection that sends nothing, or its headers too slowly, or sits idle
//! after a response, is closed after the header timeout, and refusals are
//! counted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ember_tests::TestEmber;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const HEADER_TIMEOUT: Duration = Duration::from_millis(800);

async fn ember(max_connections: usize, max_per_source: usize) -> TestEmber {
    TestEmber::start_configured(move |config| {
        config.gateway.max_connections = max_connections;
        config.gateway.max_connections_per_source = max_per_source;
        config.gateway.header_timeout_ms = HEADER_TIMEOUT.as_millis() as u64;
    })
    .await
}

/// A connection to the gateway from the loopback address `source`
/// (127.0.0.x: each is its own source).
async fn connect_from(source: [u8; 4], gateway: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind the source address");
    socket.connect(gateway).await.expect("connect")
}

/// Whether the gateway closed `stream` (end of stream or reset) within
/// `within`; false if it is still open then.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0_u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A response (a 408, or the one asked for): keep reading.
            Ok(Ok(_)) => continue,
        }
    }
}

async fn healthz(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
        .await
        .expect("request written");
    let mut buffer = vec![0_u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
        .await
        .expect("an answer in time")
        .expect("read");
    String::from_utf8_lossy(&buffer[..read]).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_slow_and_idle_connections_are_closed_after_the_header_timeout() {
    let ember = ember(1_000, 100).await;
    let gateway = ember.running.gateway_addr;

    // Nothing sent at all.
    let mut silent = connect_from([127, 0, 0, 2], gateway).await;
    let opened = Instant::now();
    assert!(
        closed_within(&mut silent, HEADER_TIMEOUT * 4).await,
        "a silent connection stays open"
    );
    assert!(
        opened.elapsed() >= HEADER_TIMEOUT / 2,
        "closed before the timeout"
    );

    // Headers a byte at a time, never finished (slowloris).
    let mut slow = connect_from([127, 0, 0, 2], gateway).await;
    let started = Instant::now();
    let mut closed = false;
    for byte in b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nX-Slow: "
        .iter()
        .cycle()
    {
        if slow.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        if closed_within(&mut slow, Duration::from_millis(100)).await {
            closed = true;
            break;
        }
        assert!(
            started.elapsed() < HEADER_TIMEOUT * 6,
            "a slowloris client kept its connection"
        );
    }
    assert!(closed);

    // A whole request answers; the connection, idle after it, is closed.
    let mut idle = connect_from([127, 0, 0, 2], gateway).await;
    let answer = healthz(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        closed_within(&mut idle, HEADER_TIMEOUT * 4).await,
        "an idle keep-alive connection stays open"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_slot() {
    // (The loopback reserve beyond a full door is checked in
    // ember-api-gateway's connections tests: every address here is
    // loopback.)
    let ember = TestEmber::start_configured(|config| {
        config.gateway.max_connections = 40;
        config.gateway.max_connections_per_source = 30;
        // Long enough that the idle connections hold their slots throughout.
        config.gateway.header_timeout_ms = 60_000;
    })
    .await;
    let gateway = ember.running.gateway_addr;

    // One address opens as many idle connections as it may, and more.
    let mut hog = Vec::new();
    for _ in 0..30 {
        let mut stream = connect_from([127, 0, 0, 3], gateway).await;
        // A byte so each is a connection being served, not only accepted.
        stream.write_all(b"G").await.expect("a first byte");
        hog.push(stream);
    }
    let mut refused = connect_from([127, 0, 0, 3], gateway).await;
    assert!(
        closed_within(&mut refused, Duration::from_secs(5)).await,
        "the address's 31st connection is refused"
    );

    // Another address is still served.
    let mut served = connect_from([127, 0, 0, 4], gateway).await;
    let answer = healthz(&mut served).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // The refusal is counted.
    let metrics = ember.metrics().await;
    let refused: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("ember_gateway_connections_refused_total "))
        .and_then(|count| count.trim().parse().ok())
        .expect("the refusal counter");
    assert!(refused >= 1, "{metrics}");
    drop(hog);
    ember.stop().await;
}
