//! A throwaway `redis-server` on a free loopback port, killed on drop.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct RedisServer {
    pub(crate) port: u16,
    child: Option<Child>,
}

fn binary() -> String {
    let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
    let found = Command::new(&bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        found,
        "redis-server not found: install it (apt-get install redis-server) or set REDIS_SERVER \
         to its path; the redis tests need a real server and do not pass without one"
    );
    bin
}

pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    l.local_addr().expect("local addr").port()
}

impl RedisServer {
    pub(crate) fn start() -> Self {
        let mut s = RedisServer {
            port: free_port(),
            child: None,
        };
        s.restart();
        s
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts (again) on the same port, and waits until it accepts connections.
    pub(crate) fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new(binary())
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) async fn conn(&self) -> tollgate::redis::redis::aio::MultiplexedConnection {
        let client = tollgate::redis::redis::Client::open(self.url()).expect("client");
        client
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
