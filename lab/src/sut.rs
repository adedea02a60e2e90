//! The system under test for one variant: redis-server (laravel only), php-fpm (pm static) and
//! nginx on a loopback port, from the templates in lab/conf, in the variant's own directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::params::{is_resilient, Params};
use crate::procs::{free_port, wait_listening, Child};

/// Extensions every variant loads (php-fpm runs with -n, so nothing comes from php.ini).
/// igbinary must come before redis.
const BASE_EXTENSIONS: [&str; 5] = ["ctype", "mbstring", "curl", "igbinary", "redis"];

/// A running php-fpm + nginx (+ redis) for one variant. Dropping it stops everything.
pub struct SystemUnderTest {
    pub port: u16,
    pub dir: PathBuf,
    // Declared in stop order: nginx first, then fpm, then redis.
    nginx: Child,
    fpm: Child,
    _host_b: Option<crate::two_hosts::HostB>,
    _redis: Option<Child>,
    /// The resilient variants' shared-memory segment (background workers map the same one).
    pub shm_path: Option<PathBuf>,
    /// The laravel variant's redis-server (0 for the others).
    pub redis_port: u16,
    /// The URL the app calls.
    pub upstream_url: String,
}

impl SystemUnderTest {
    /// Writes the configs into `dir` and starts everything; waits until /health answers.
    pub fn start(
        p: &Params,
        variant: &str,
        dir: &Path,
        upstream_url: &str,
    ) -> Result<SystemUnderTest, String> {
        std::fs::create_dir_all(dir.join("nginx-tmp")).map_err(|e| e.to_string())?;
        let app = p.root.join("lab/app");
        let conf = p.root.join("lab/conf");

        let (redis, redis_port) = if variant == "laravel" || variant == "resilient-redis" {
            let port = free_port()?;
            let mut cmd = Command::new("redis-server");
            cmd.args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args([
                "--dir",
                &dir.display().to_string(),
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ]);
            let mut child = Child::spawn("redis-server", cmd, &dir.join("redis.log"))?;
            wait_listening(&mut child, port, "redis.log")?;
            (Some(child), port)
        } else {
            (None, 0)
        };

        let vars = [
            ("DIR", dir.display().to_string()),
            ("APP", app.display().to_string()),
            ("WORKERS", p.workers.to_string()),
            ("VARIANT", variant.to_string()),
            ("UPSTREAM_URL", upstream_url.to_string()),
            ("REDIS_PORT", redis_port.to_string()),
            ("DEADLINE_MS", p.deadline_ms.to_string()),
            (
                "FUNNEL_WAIT_MS",
                p.funnel_wait_ms_of(variant).unwrap_or(0).to_string(),
            ),
            ("FUNNEL_RESERVE", p.reserve_of(variant).to_string()),
            ("FUNNEL_SHARE", u8::from(p.share_of(variant)).to_string()),
            ("FUNNEL_LIMIT", p.funnel_limit_of(variant).to_string()),
            ("BUDGET_RATIO", p.budget.ratio.to_string()),
            ("BUDGET_FLOOR", p.budget.floor.to_string()),
            ("BUDGET_WINDOW", p.budget.window_s.to_string()),
            ("FPM_PORT", free_port()?.to_string()),
            (
                "STATUS_SOCK",
                crate::sockets::fpm_status(p.scenario.name(), variant, 'a')?
                    .display()
                    .to_string(),
            ),
        ];
        let fpm_conf = dir.join("php-fpm.conf");
        render(&conf.join("php-fpm.conf.tmpl"), &fpm_conf, &vars)?;
        // The two-hosts scenario: a second php-fpm with its own segment, nginx balancing both.
        let host_b = crate::two_hosts::HostB::start(p, variant, dir, &fpm_conf, &vars)?;

        let mut cmd = Command::new("php-fpm8.2");
        cmd.args(["-n", "-R", "-F", "-y"]).arg(&fpm_conf);
        let shm_path = is_resilient(variant).then(|| {
            // Each variant (and scenario) its own segment: no funnel slot or budget token
            // carries over.
            let shm = PathBuf::from(format!(
                "/dev/shm/resilient-lab-{}-{}-{}.shm",
                std::process::id(),
                p.scenario.name(),
                variant
            ));
            let _ = std::fs::remove_file(&shm);
            shm
        });
        for d in php_ini(p, shm_path.as_deref()) {
            cmd.args(["-d", &d]);
        }
        std::fs::write(dir.join("php-fpm.cmd"), format!("{cmd:?}\n")).map_err(|e| e.to_string())?;
        let fpm = Child::spawn("php-fpm", cmd, &dir.join("fpm.out"))?;

        let port = free_port()?;
        let mut vars = vars.to_vec();
        vars.push(("PORT", port.to_string()));
        let mut nginx_tmpl = conf.join("nginx.conf.tmpl");
        if let Some(b) = &host_b {
            vars.extend(b.vars());
            nginx_tmpl = conf.join(crate::two_hosts::NGINX_TEMPLATE);
        }
        let nginx_conf = dir.join("nginx.conf");
        render(&nginx_tmpl, &nginx_conf, &vars)?;
        let mut cmd = Command::new("nginx");
        cmd.arg("-c")
            .arg(&nginx_conf)
            .arg("-p")
            .arg(dir)
            .args(["-e", &dir.join("nginx-error.log").display().to_string()]);
        let nginx = Child::spawn("nginx", cmd, &dir.join("nginx.out"))?;

        let mut sut = SystemUnderTest {
            port,
            dir: dir.to_path_buf(),
            nginx,
            fpm,
            _host_b: host_b,
            _redis: redis,
            shm_path,
            redis_port,
            upstream_url: upstream_url.to_string(),
        };
        wait_listening(&mut sut.nginx, port, "nginx-error.log")?;
        sut.wait_health(Duration::from_secs(15))?;
        Ok(sut)
    }

    fn wait_health(&mut self, timeout: Duration) -> Result<(), String> {
        let until = std::time::Instant::now() + timeout;
        let mut last = String::new();
        while std::time::Instant::now() < until {
            self.fpm
                .check_alive()
                .map_err(|e| format!("{e} (see {}/fpm-error.log)", self.dir.display()))?;
            self.nginx.check_alive()?;
            match http_get(self.port, "/health") {
                Ok((200, _)) => return Ok(()),
                Ok((s, b)) => last = format!("HTTP {s}: {b}"),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("/health did not answer 200 ({last})"))
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for SystemUnderTest {
    fn drop(&mut self) {
        self.nginx.stop();
        self.fpm.stop();
        if let Some(p) = &self.shm_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The `-d` settings of every PHP process of a variant (php-fpm and the background CLI workers
/// alike; both run with -n): explicit extensions, and for the resilient variants the extension
/// with its own segment. error_reporting as php.ini-production (E_ALL & ~E_DEPRECATED &
/// ~E_STRICT): Laravel 8 on PHP 8.2 raises two deprecations per Http call, which would only fill
/// the error log.
pub fn php_ini(p: &Params, shm: Option<&Path>) -> Vec<String> {
    let mut d: Vec<String> = [
        "zend_extension=opcache",
        "opcache.enable=1",
        "opcache.enable_cli=0",
        "display_errors=0",
        "log_errors=1",
        "error_reporting=22527",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for ext in BASE_EXTENSIONS {
        d.push(format!("extension={ext}"));
    }
    if let Some(shm) = shm {
        d.push(format!("extension={}", p.extension.display()));
        d.push(format!("resilient.shm_path={}", shm.display()));
        // The web default is "no retry"; this experiment is about retries on the web, so it
        // allows the 3 attempts the other variants make (CLI workers are console: not capped).
        d.push("resilient.web_max_attempts=3".into());
    }
    d
}

/// Fills `{{NAME}}` placeholders; refuses to leave one unfilled.
pub(crate) fn render(tmpl: &Path, out: &Path, vars: &[(&str, String)]) -> Result<(), String> {
    let mut s = std::fs::read_to_string(tmpl).map_err(|e| format!("{}: {e}", tmpl.display()))?;
    for (k, v) in vars {
        s = s.replace(&format!("{{{{{k}}}}}"), v);
    }
    if let Some(i) = s.find("{{") {
        return Err(format!(
            "{}: unfilled placeholder near '{}'",
            tmpl.display(),
            &s[i..(i + 30).min(s.len())]
        ));
    }
    std::fs::write(out, s).map_err(|e| format!("{}: {e}", out.display()))
}

/// A minimal blocking HTTP/1.0 GET on loopback (used outside the load: setup, status).
pub fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").map_err(|e| e.to_string())?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).map_err(|e| e.to_string())?;
    let status = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("bad HTTP answer")?;
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}
