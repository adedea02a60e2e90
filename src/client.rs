//! `Resilient\Client`: the PHP face of `resilient_http`.
//!
//! No policy here. The constructor turns the options array into a
//! `resilient_http::ClientConfig` through [`crate::options`] (an unknown key or a bad value is
//! a `\ValueError` naming the option, a wrong type a `\TypeError`), applies the web caps of
//! `Resilient\Context` when serving a web request, and binds the funnel, the retry budget and
//! the circuit breaker named after the client to the host-wide shared memory, where every call
//! and attempt is also recorded in the name's metrics (`Resilient\Metrics`). Each call then:
//!
//! - takes this process's runtime and transport (created on first use, per pid: a child of
//!   `pcntl_fork` gets its own),
//! - passes the enclosing `Resilient\Deadline::within` remainder (the earlier deadline wins),
//! - blocks on the attempt loop, calling `on_attempt` between polls, once per attempt, while
//!   the call is in progress (outside the runtime, so the callable may throw or even make
//!   another call; a throwing callable cancels the call and its exception propagates),
//! - returns a `Resilient\Response`, or throws the matching `Resilient\Unavailable` subclass
//!   (code = last HTTP status, 0 for a connection error; `response()` = the last Response);
//!   with a `fallback` callable, calls it with that exception instead and returns what it
//!   returns (an exception it throws propagates).
//!
//! Funnel leases taken by the loop are listed in `held` while in flight, so a bailout (fatal
//! error, `max_execution_time`) in the middle of a call still gives them back at request end.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ext_php_rs::boxed::ZBox;
use ext_php_rs::convert::{IntoZval, IntoZvalDyn};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ArrayKey, ZendCallable, ZendHashTable, ZendObject, Zval};
use ext_php_rs::zend::{bailout, try_catch, CatchError};
use resilient_core::{LeaseId, Segment};
use resilient_http::{process_io, Driven, ProcessIo, Wake, FORKED_MESSAGE};
use resilient_http::{
    AttemptRecord, Backend, BackendKind, CallEnv, CallEvents, FailureKind, HttpClient,
    LeaseRegistry, MetricsEvents, PreparedRequest, RequestOptions, SharedMemory, Unavailable,
};

use crate::coerce::{ArrayArg, StringArg};
use crate::exceptions::{self, Kind};
use crate::options::{key_string, keyed_entries, Data};
use crate::response::Response;
use crate::{coerce, context, deadline, errors, held, interrupt, options, segment};

#[php_class]
#[php(name = "Resilient\\Client")]
pub struct Client {
    name: String,
    /// What the HTTP client is built from (the validated options, web or console).
    recipe: Recipe,
    /// The HTTP client with its guards, on the segment it was built on; see [`Client::built`].
    built: RefCell<Built>,
    /// The `on_attempt` callable (a counted reference), if any.
    on_attempt: Option<Zval>,
    /// The `fallback` callable (a counted reference), if any.
    fallback: Option<Zval>,
}

/// The constructor's inputs to [`build`], kept to build the client again on another segment.
struct Recipe {
    config: resilient_http::ClientConfig,
    web: bool,
    /// False for [`Client::validator`]: bound to no segment or Redis, and it sends nothing.
    bound: bool,
}

/// An HTTP client bound to one segment.
#[derive(Clone)]
struct Built {
    http: Arc<HttpClient>,
    /// The name's host-wide metrics, when the segment is usable (fallback uses are counted).
    events: Option<Arc<dyn CallEvents>>,
    /// The segment its guards and metrics use (`None`: none was usable).
    segment: Option<Arc<Segment>>,
}

impl Built {
    /// When a call made now must end: its client's `deadline` (the web or console cap
    /// included) or an enclosing `Deadline::within`, the earlier. Taken before the request's
    /// options are read, so reading a part's stream counts in it.
    fn deadline(&self) -> Option<Instant> {
        self.http
            .policy()
            .deadline_within(enclosing_remaining())
            .and_then(|d| Instant::now().checked_add(d))
    }

    fn prepare(
        &self,
        method: &str,
        path: &str,
        options: RequestOptions,
    ) -> PhpResult<Arc<PreparedRequest>> {
        self.http
            .prepare(method, path, options)
            .map_err(options::config_error)
    }
}

/// Builds the HTTP client of `name`: web caps, this process's transport, and the funnel,
/// budget, breaker and metrics on the process's segment (or Redis).
fn build(name: &str, recipe: &Recipe) -> PhpResult<Built> {
    let config = recipe.config.clone();
    if !recipe.bound {
        let http = HttpClient::builder(config)
            .caps(context::caps(recipe.web))
            .build();
        return Ok(Built {
            http: Arc::new(http),
            events: None,
            segment: None,
        });
    }
    let (backend_kind, on_backend_error, hosts) = (
        config.backend.clone(),
        config.on_backend_error,
        config.hosts,
    );
    let caps = context::caps(recipe.web);
    let mut builder = HttpClient::builder(config).caps(caps);
    // Metrics are best effort: a client without a funnel or a budget works as before when
    // the segment is unusable (`shm_required`) or its table is full; it records nothing.
    // The name is listed once the client is built: a client refused below (its budget's
    // entry did not fit) leaves no row of zeros in the snapshots.
    let segment = segment::shared().ok();
    let mut metrics_lost = None;
    let metrics =
        segment
            .clone()
            .and_then(|seg| match resilient_core::Metrics::unlisted(seg, name) {
                Ok(metrics) => Some(metrics),
                Err(e) => {
                    metrics_lost = e.is_table_full().then_some(e);
                    None
                }
            });
    let events: Option<Arc<dyn CallEvents>> = metrics
        .clone()
        .map(|metrics| Arc::new(MetricsEvents::new(metrics)) as Arc<dyn CallEvents>);
    if let Some(events) = &events {
        builder = builder.events(events.clone());
    }
    if builder.wants_backend() {
        let backend = choose_backend(backend_kind, on_backend_error, hosts, events.clone())?;
        builder = builder
            .backend(backend.as_ref(), name, !recipe.web)
            .map_err(errors::php)?;
    }
    let http = builder.build();
    if let Some(metrics) = &metrics {
        metrics.list();
        if let Some(f) = recipe.config.funnel.as_ref().filter(|f| f.auto.is_none()) {
            metrics.funnel_limit(f.limit);
        }
    }
    if let Some(e) = metrics_lost {
        say_metrics_lost(name, &e);
    }
    Ok(Built {
        http: Arc::new(http),
        events,
        segment,
    })
}

/// The process that last said a client's metrics did not fit (once per process: a worker
/// making such clients per job would fill its log).
static METRICS_LOST_SAID: AtomicU32 = AtomicU32::new(0);

/// Tells PHP's error log that a client built without metrics (its table full) is missing from
/// `Metrics::snapshot()`, once per process.
fn say_metrics_lost(name: &str, e: &resilient_core::Error) {
    let pid = std::process::id();
    if METRICS_LOST_SAID.swap(pid, Ordering::Relaxed) == pid {
        return;
    }
    errors::log_warning(&format!(
        "resilient: metrics of upstream '{name}' are not recorded: {e}. The client works; \
         other names that do not fit are not said again by this process (docs/shared-memory.md)"
    ));
}

/// Lists the loop's leases in `held` while they are in flight.
struct HeldLeases(Arc<Segment>);

impl LeaseRegistry for HeldLeases {
    fn held(&self, id: LeaseId) {
        held::add(&self.0, id);
    }
    fn released(&self, id: LeaseId) {
        held::remove(id);
    }
}

#[php_impl]
impl Client {
    /// `new Client(string $name, array $options = [])`. The name identifies the funnel and the
    /// retry budget shared by every process of the host.
    ///
    /// Options are checked here: an unknown key or a bad value throws `\ValueError` naming
    /// the option (`option 'funnel.limit': must be between 1 and 64, got 0`, the words of
    /// `new Funnel(...)`), a wrong type `\TypeError` (`option 'timeout' must be of type
    /// float, array given`). Numeric strings (`'0.5'`, `'4'`) are accepted as PHP accepts
    /// them. See docs/errors.md.
    pub fn __construct(name: StringArg, options: Option<ArrayArg>) -> PhpResult<Self> {
        const CTOR: &str = "Resilient\\Client::__construct";
        crate::construct_once::refuse_second_call::<Self>(CTOR)?;
        Self::make(CTOR, name, options, true)
    }

    /// `Client::validator(string $name, array $options = [])`: a client made from the same
    /// options (refused as `new Client` refuses them) whose one use is `validateRequest()`. It
    /// is bound to nothing shared: no entry for the name in the host's segment or on Redis, so a
    /// test double (the Laravel package's `Resilient::fake()`) checks calls without filling the
    /// test host's segment. Its sending methods throw `\LogicException`.
    pub fn validator(name: StringArg, options: Option<ArrayArg>) -> PhpResult<Self> {
        Self::make("Resilient\\Client::validator", name, options, false)
    }

    /// @internal For `make bench`: `$n` funnel admissions, each released at once (`$op`
    /// `'funnel'`), or `$n` originals each followed by a retry decision (`'budget'`), through the backend `$options`
    /// choose (`backend`, `on_backend_error`, `funnel`, `budget`), with no HTTP. Returns how
    /// many were admitted or allowed.
    pub fn bench_backend(
        name: StringArg,
        options: ArrayArg,
        op: StringArg,
        n: &Zval,
    ) -> PhpResult<i64> {
        const FUNCTION: &str = "Resilient\\Client::benchBackend";
        let name = name.utf8(FUNCTION, 1, "name")?;
        let options = options.array(FUNCTION, 2, "options")?;
        let op = op.utf8(FUNCTION, 3, "op")?;
        let n = coerce::int_arg(n, FUNCTION, 4, "n")?;
        resilient_core::validate::name("name", &name).map_err(errors::php)?;
        let n = resilient_core::validate::count("n", n, 0, 1_000_000_000).map_err(errors::php)?;
        let (mut config, _) = options::client(Some(options))?;
        if options.get("backend").is_none() {
            config.backend = backend_from_ini()?;
        }
        let backend = choose_backend(
            config.backend.clone(),
            config.on_backend_error,
            config.hosts,
            None,
        )?;
        let now = resilient_core::clock::monotonic_ms;
        let mut yes = 0;
        interrupt::interruptible(1, move |poll| {
            match op.as_str() {
                "funnel" => {
                    let f = config.funnel.ok_or("bench_backend: no 'funnel' option")?;
                    let lease = f.lease.unwrap_or(Duration::from_secs(5));
                    let cfg = resilient_core::FunnelConfig::new(f.limit, f.reserve, lease)
                        .map_err(errors::php)?;
                    let guard = backend.funnel(&name, cfg, false).map_err(errors::php)?;
                    for _ in 0..n {
                        poll.check()?;
                        if let Ok(permit) = guard.admit(1, now()) {
                            yes += 1;
                            drop(permit);
                        }
                    }
                }
                "budget" => {
                    let b = config.budget.ok_or("bench_backend: no 'budget' option")?;
                    let cfg = resilient_core::BudgetConfig::new(b.ratio, b.floor, b.window)
                        .map_err(errors::php)?;
                    let budget = backend.budget(&name, cfg).map_err(errors::php)?;
                    for _ in 0..n {
                        poll.check()?;
                        budget.record_original(now());
                        yes += i64::from(budget.try_consume(now()));
                    }
                }
                _ => return Err("bench_backend: op must be 'funnel' or 'budget'".into()),
            }
            Ok(yes)
        })
    }

    /// `get(string $path, array $query = [], array $options = [])`. Options given as the query (an
    /// array under `headers`, `query`, `json`, `form`, `multipart`, `cert`, `ssl_key`, `proxy`,
    /// `form_params` or `auth`) are a `\ValueError`.
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn get(
        &self,
        path: StringArg,
        query: Option<ArrayArg>,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        let name = "Resilient\\Client::get";
        self.verb(name, "GET", &path, query.as_ref(), options.as_ref())
    }

    /// `head(string $path, array $query = [], array $options = [])`. Options given as the query
    /// are a `\ValueError`, as for `get()`.
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn head(
        &self,
        path: StringArg,
        query: Option<ArrayArg>,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        let name = "Resilient\\Client::head";
        self.verb(name, "HEAD", &path, query.as_ref(), options.as_ref())
    }

    /// `post(string $path, array $json = [], array $options = [])`: a non-empty `$json` is
    /// sent as the JSON body. Retried only with an `idempotency_key`.
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn post(
        &self,
        path: StringArg,
        json: Option<ArrayArg>,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        let name = "Resilient\\Client::post";
        self.verb(name, "POST", &path, json.as_ref(), options.as_ref())
    }

    /// `put(string $path, array $json = [], array $options = [])`.
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn put(
        &self,
        path: StringArg,
        json: Option<ArrayArg>,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        let name = "Resilient\\Client::put";
        self.verb(name, "PUT", &path, json.as_ref(), options.as_ref())
    }

    /// `patch(string $path, array $json = [], array $options = [])`. Retried only with an
    /// `idempotency_key`.
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn patch(
        &self,
        path: StringArg,
        json: Option<ArrayArg>,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        let name = "Resilient\\Client::patch";
        self.verb(name, "PATCH", &path, json.as_ref(), options.as_ref())
    }

    /// `delete(string $path, array $json = [], array $options = [])`.
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn delete(
        &self,
        path: StringArg,
        json: Option<ArrayArg>,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        let name = "Resilient\\Client::delete";
        self.verb(name, "DELETE", &path, json.as_ref(), options.as_ref())
    }

    /// `request(string $method, string $path, array $options = [])` with options `query`,
    /// `json`, `body`, `form`, `multipart`, `headers`, `idempotency_key`, `sink`, `timeout`,
    /// `connect_timeout`, and the client's `verify`, `cert`, `ssl_key`, `proxy`,
    /// `allow_redirects`, `decode_content` for this request (docs/client-options.md).
    /// Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
    /// the call is unavailable.
    pub fn request(
        &self,
        method: StringArg,
        path: StringArg,
        options: Option<ArrayArg>,
    ) -> PhpResult<Zval> {
        const REQUEST: &str = "Resilient\\Client::request";
        let method = method.utf8(REQUEST, 1, "method")?;
        let path = path.utf8(REQUEST, 2, "path")?;
        let options = ArrayArg::optional(options.as_ref(), REQUEST, 3, "options")?;
        let b = self.for_sending()?;
        let until = b.deadline();
        let request = b.prepare(
            &method,
            &path,
            options::request(options, None, &b.http.config().transport, until)?,
        )?;
        self.run(&b, request, until)
    }

    /// `validateRequest(string $method, string $path, array $options = [])`: checks the call
    /// `request()` would make, with the same exceptions for the same mistakes, and sends
    /// nothing. For test doubles (the Laravel package's `Resilient::fake()`), so a call that
    /// would throw in production throws under the fake too. Reads what `request()` reads
    /// before sending (a multipart part's stream).
    pub fn validate_request(
        &self,
        method: StringArg,
        path: StringArg,
        options: Option<ArrayArg>,
    ) -> PhpResult<()> {
        const VALIDATE: &str = "Resilient\\Client::validateRequest";
        let method = method.utf8(VALIDATE, 1, "method")?;
        let path = path.utf8(VALIDATE, 2, "path")?;
        let options = ArrayArg::optional(options.as_ref(), VALIDATE, 3, "options")?;
        let b = self.built()?;
        let until = b.deadline();
        b.prepare(
            &method,
            &path,
            options::request(options, None, &b.http.config().transport, until)?,
        )?;
        Ok(())
    }

    /// `pool(array $requests, int $concurrency = 5)`: `$requests` is `key => [method, path,
    /// options?]`; at most `$concurrency` in flight (a sliding window); returns `key =>
    /// Response|Unavailable` (failures are values, not thrown). When more than half of 3 or
    /// more first attempts failed, no call is retried (the upstream is in trouble); a retry
    /// waits only until the first attempts still running cannot make it so. The requests run
    /// on this thread between the callables' calls: a slow `on_attempt` holds every request of
    /// the pool, whose timeouts keep running (keep it quick: queue what it records, write it
    /// after); one that throws ends the pool there, its requests in flight cancelled and the
    /// results so far lost (catch inside it).
    pub fn pool(
        &self,
        requests: ArrayArg,
        concurrency: Option<&Zval>,
    ) -> PhpResult<ZBox<ZendHashTable>> {
        let requests = requests.array("Resilient\\Client::pool", 1, "requests")?;
        let concurrency = match coerce::given(concurrency) {
            Some(z) => coerce::int_arg(z, "Resilient\\Client::pool", 2, "concurrency")?,
            None => 5,
        };
        if !(1..=1024).contains(&concurrency) {
            return Err(exceptions::value_error(format!("Resilient\\Client::pool(): argument 'concurrency' must be between 1 and 1024, got {concurrency}")));
        }
        let b = self.for_sending()?;
        let until = b.deadline();
        let mut keys = Vec::with_capacity(requests.len());
        let mut prepared = Vec::with_capacity(requests.len());
        for (key, item) in keyed_entries(requests, "requests").map_err(exceptions::value_error)? {
            let label = resilient_http::shown_label(&key_string(&key));
            let (method, path, options) = pool_item(item, &label)?;
            // Every error of the item's request, its options' and its URL's, names the item.
            let request = exceptions::about_item(&format!("pool request '{label}': "), || {
                let options = options.as_ref().and_then(Zval::array);
                let options = options::request(options, None, &b.http.config().transport, until)?;
                b.http
                    .prepare(&method, &path, options)
                    .map_err(|e| exceptions::value_error(e.to_string()))
            })?;
            prepared.push(request);
            keys.push(key_owned(&key));
        }
        check_stack()?;
        let results = match process_io() {
            // Nothing can be sent: each request's failure, as a value.
            Err(why) => prepared
                .iter()
                .map(|request| Err(b.http.not_sent(request, &why)))
                .collect(),
            Ok(io) => {
                let (env, events) = self.call_env(&b.http, io);
                let future = b
                    .http
                    .pool(env, prepared, concurrency as usize, left_of(until));
                let mut failure = None;
                match io.drive(future, events, Some(&interrupt::pending), |wake| {
                    self.wake(wake, &mut failure)
                }) {
                    Driven::Done((results, _summary)) => results,
                    Driven::Forked => return Err(forked()),
                    Driven::Cancelled => return Err(stopped(failure, "the pool was cancelled")),
                }
            }
        };
        let mut out = ZendHashTable::with_capacity(u32::try_from(keys.len()).unwrap_or(u32::MAX));
        for (key, result) in keys.into_iter().zip(results) {
            let value = match result {
                Ok(response) => Response::into_zval_object(response).unwrap_or_default(),
                Err(unavailable) => unavailable_object(unavailable)?,
            };
            match key {
                OwnedKey::Index(i) => out.insert_at_index(i, value)?,
                OwnedKey::Name(name) => out.insert(name.as_str(), value)?,
            }
        }
        Ok(out)
    }

    /// The client's name (its funnel and budget name).
    pub fn name(&self) -> String {
        self.name.clone()
    }
}

impl Client {
    /// `new Client(...)` (`bound`) or `Client::validator(...)`, named `function` in errors.
    fn make(
        function: &str,
        name: StringArg,
        options: Option<ArrayArg>,
        bound: bool,
    ) -> PhpResult<Self> {
        let name = name.utf8(function, 1, "name")?;
        let options = ArrayArg::optional(options.as_ref(), function, 2, "options")?;
        resilient_core::validate::name("name", &name).map_err(errors::php)?;
        let (mut config, binding) = options::client(options)?;
        if options.is_none_or(|o| o.get("backend").is_none()) {
            config.backend = backend_from_ini()?;
        }
        config.check_backend().map_err(options::config_error)?;
        let web = binding.context.unwrap_or_else(context::is_web);
        context::check_caps_for(web)?;
        let recipe = Recipe { config, web, bound };
        let built = build(&name, &recipe)?;
        Ok(Client {
            name,
            recipe,
            built: RefCell::new(built),
            on_attempt: binding.on_attempt,
            fallback: binding.fallback,
        })
    }

    /// get/post/...: `$data` (argument 2) becomes the query (GET/HEAD) or the JSON body
    /// (others); the arguments are read here, with the method's name in PHP's wording.
    fn verb(
        &self,
        function: &str,
        method: &str,
        path: &StringArg,
        data: Option<&ArrayArg>,
        options: Option<&ArrayArg>,
    ) -> PhpResult<Zval> {
        let query = matches!(method, "GET" | "HEAD");
        let path = path.utf8(function, 1, "path")?;
        let data_name = if query { "query" } else { "json" };
        let data = ArrayArg::optional(data, function, 2, data_name)?;
        if let Some(key) = data.filter(|_| query).and_then(options_mistaken_for_query) {
            return Err(exceptions::value_error(format!(
                "{function}(): Argument #2 ($query) holds the key '{key}' with an array, as request options do: the options are argument #3 ($options); as a query they would be sent in the URL (a query parameter of that name goes in $options['query'])"
            )));
        }
        let options = ArrayArg::optional(options, function, 3, "options")?;
        let data = data.map(|d| match query {
            true => Data::Query(d),
            false => Data::Json(d),
        });
        let b = self.for_sending()?;
        let until = b.deadline();
        let request = b.prepare(
            method,
            &path,
            options::request(options, data, &b.http.config().transport, until)?,
        )?;
        self.run(&b, request, until)
    }

    /// [`Client::built`] for a call that sends; a validator's refuses.
    fn for_sending(&self) -> PhpResult<Built> {
        if !self.recipe.bound {
            return Err(PhpException::new(
                "resilient: this client was made by Client::validator() to check calls; it sends none (use new Client)".into(),
                0,
                exceptions::logic_exception(),
            ));
        }
        self.built()
    }

    /// The HTTP client for a call. A long-running process (a queue worker, Octane) may keep a
    /// client while its segment file is removed or replaced; `segment::shared()` notices that
    /// within a second and opens the new file, and the client is then built again on it, as a
    /// new one would be, instead of counting into the old mapping.
    fn built(&self) -> PhpResult<Built> {
        let current = self.built.borrow().clone();
        if !self.recipe.bound {
            return Ok(current);
        }
        let segment = segment::shared().ok();
        if current.segment.as_ref().map(Arc::as_ptr) == segment.as_ref().map(Arc::as_ptr) {
            return Ok(current);
        }
        let fresh = build(&self.name, &self.recipe)?;
        *self.built.borrow_mut() = fresh.clone();
        Ok(fresh)
    }

    /// This process's transport, and the observer channel when `on_attempt` is set.
    /// `max_body` is lowered to what `memory_limit` leaves now.
    fn call_env(
        &self,
        http: &HttpClient,
        io: &ProcessIo,
    ) -> (
        CallEnv,
        Option<tokio::sync::mpsc::UnboundedReceiver<AttemptRecord>>,
    ) {
        let env = http
            .env()
            .clone()
            .transport(io.transport())
            .max_body(context::memory_headroom());
        if self.on_attempt.is_none() {
            return (env, None);
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (env.observer(Arc::new(tx)), Some(rx))
    }

    /// One call to its end: a Response, or the Unavailable subclass thrown (or given to the
    /// `fallback`, whose value is returned instead).
    /// `until`: [`Built::deadline`], taken before the request was read.
    fn run(
        &self,
        b: &Built,
        request: Arc<PreparedRequest>,
        until: Option<Instant>,
    ) -> PhpResult<Zval> {
        check_stack()?;
        let io = match process_io() {
            Ok(io) => io,
            Err(why) => return self.unavailable(b, b.http.not_sent(&request, &why)),
        };
        let (env, events) = self.call_env(&b.http, io);
        let future = b.http.call(env, request, left_of(until));
        let mut failure = None;
        let driven = io.drive(future, events, Some(&interrupt::pending), |wake| {
            self.wake(wake, &mut failure)
        });
        match driven {
            Driven::Done(Ok(response)) => Response::into_zval_object(response)
                .ok_or_else(|| PhpException::from("Resilient\\Response could not be created")),
            Driven::Done(Err(unavailable)) => self.unavailable(b, unavailable),
            // A bailout in the child (inside the `on_attempt` that forked) goes on as one.
            Driven::Forked if matches!(failure, Some(Stopped::Bailout)) => {
                Err(stopped(failure, ""))
            }
            Driven::Forked => Err(forked()),
            Driven::Cancelled => Err(stopped(failure, "the call was cancelled")),
        }
    }

    /// The call ended `unavailable`: thrown, or given to the `fallback`.
    fn unavailable(&self, b: &Built, unavailable: Unavailable) -> PhpResult<Zval> {
        match &self.fallback {
            None => Err(throw_unavailable(unavailable)),
            Some(fallback) => self.fall_back(b, fallback, unavailable),
        }
    }

    /// Calls `fallback` with the `Unavailable` the call ended with; its value is the call's
    /// (and counted as a fallback used). An exception it throws stays pending and propagates.
    fn fall_back(&self, b: &Built, fallback: &Zval, unavailable: Unavailable) -> PhpResult<Zval> {
        let callable = ZendCallable::new(fallback).map_err(PhpException::from)?;
        let exception = unavailable_object(unavailable)?;
        let value = callable
            .try_call(vec![&exception])
            .map_err(PhpException::from)?;
        if let Some(events) = &b.events {
            events.fallback_used();
        }
        Ok(value)
    }

    /// Handles what woke a call: a record for `on_attempt`, or a PHP interrupt (a signal's
    /// handler, `max_execution_time`). False (cancel the call) when PHP code threw or bailed
    /// out. A bailout (`max_execution_time`, also when it lands inside `on_attempt`; a fatal
    /// error in either) is caught here so that the call ends first, its future dropped with
    /// its funnel slot and in-flight count, before the shutdown functions run; [`stopped`]
    /// then lets it go on.
    fn wake(&self, wake: Wake, failure: &mut Option<Stopped>) -> bool {
        let ran = try_catch(AssertUnwindSafe(|| match wake {
            Wake::Record(record) => self.notify(record),
            Wake::Interrupt => interrupt::handle().map_err(Stopped::Threw),
        }));
        let stop = match ran {
            Ok(Ok(())) => return true,
            Ok(Err(stop)) => stop,
            Err(CatchError::Bailout) => Stopped::Bailout,
            Err(other) => Stopped::Threw(PhpException::from(format!(
                "Resilient\\Client: a callback failed: {other}"
            ))),
        };
        *failure = Some(stop);
        false
    }

    /// Calls `on_attempt` with one record; `Err` (cancel the call) when it throws.
    fn notify(&self, record: AttemptRecord) -> Result<(), Stopped> {
        let Some(callable) = &self.on_attempt else {
            return Ok(());
        };
        let Ok(callable) = ZendCallable::new(callable) else {
            return Ok(());
        };
        let array = self.record_array(&record).map_err(Stopped::Threw)?;
        callable
            .try_call(vec![&array])
            .map(|_| ())
            .map_err(|e| Stopped::Threw(PhpException::from(e)))
    }

    /// The attempt as the array `on_attempt` receives.
    fn record_array(&self, r: &AttemptRecord) -> PhpResult<Zval> {
        let mut ht = ZendHashTable::new();
        ht.insert("client", self.name.as_str())?;
        ht.insert("method", r.method.as_str())?;
        ht.insert("url", r.url.as_str())?;
        ht.insert("attempt", i64::from(r.attempt))?;
        ht.insert("status", r.status().map(i64::from))?;
        ht.insert("error", r.error())?;
        ht.insert("duration_ms", r.duration.as_secs_f64() * 1000.0)?;
        ht.insert("retry_follows", r.retry_follows())?;
        ht.insert("gives_up", r.gives_up())?;
        ht.insert("reason", r.reason())?;
        let mut z = Zval::new();
        z.set_hashtable(ht);
        Ok(z)
    }
}

/// Why PHP's side cancelled a call.
enum Stopped {
    /// `on_attempt` or a signal's handler threw (or called `exit()`).
    Threw(PhpException),
    /// The engine bailed out in PHP code the call ran (`max_execution_time`, a fatal error).
    Bailout,
}

/// The exception a cancelled call ends with; after a bailout, the bailout goes on instead
/// (never returns), now that the call's future, with its funnel slot and in-flight count, is
/// gone.
fn stopped(failure: Option<Stopped>, otherwise: &str) -> PhpException {
    match failure {
        Some(Stopped::Threw(e)) => e,
        // SAFETY: the engine bailed out inside `try_catch` in `Client::wake`; going on with it
        // is what the engine would have done, and nothing of PHP's ran since.
        Some(Stopped::Bailout) => unsafe { bailout() },
        None => PhpException::from(otherwise),
    }
}

/// `\RuntimeException` for a call that a fork cut off (in the child; never retried).
fn forked() -> PhpException {
    PhpException::new(
        format!("Resilient\\Client: {FORKED_MESSAGE}"),
        0,
        exceptions::runtime_exception(),
    )
}

/// C stack kept free below a call: what `on_attempt` and the PHP it runs may need before the
/// next check (at most a quarter of the stack).
const STACK_RESERVE: usize = 1024 * 1024;

/// C stack a call needs whatever the stack's size: the HTTP stack (hyper, rustls) runs on the
/// caller's. Measured in a Fiber (`fiber.stack_size`): a plain call needs 32K, a TLS handshake
/// 64K, a pool 48K; three times the most, so that a path not measured (a proxy, Redis over
/// TLS) does not overflow into the guard page (SIGSEGV). A Fiber of 256K makes calls.
const CALL_STACK: usize = 192 * 1024;

/// What a stack holds above a call before any nesting (a script's, a framework's frames): a
/// stack smaller than [`CALL_STACK`] and this is called too small rather than too deep.
const STACK_SLACK: usize = 32 * 1024;

/// The nesting limit for calls made from `on_attempt` (a callable that calls the client, whose
/// callable calls the client...). Each level costs C stack (the engine's call into the callable,
/// the runtime's frames), so 1,000 levels overflowed the 8 MB stack with a SIGSEGV. A call is
/// refused with a `\RuntimeException` when less than [`STACK_RESERVE`] of the stack is left.
/// Measured on the stack (the thread's, or a Fiber's), see [`crate::stack`].
fn check_stack() -> PhpResult<()> {
    crate::stack::check(STACK_RESERVE, CALL_STACK).map_err(|short| {
        let (left, needed) = (short.left / 1024, short.needed / 1024);
        // Too small whatever the nesting: even with little of it used above the call (the
        // frames of a script or a framework), less than a call needs would be left.
        let message = if short.size < CALL_STACK + STACK_SLACK {
            let setting = if short.fiber {
                "fiber.stack_size"
            } else {
                "ulimit -s"
            };
            format!("Resilient\\Client: the stack this call runs on is too small for a call ({setting}: {left} KiB left, at least {needed} KiB needed): the call was not made")
        } else {
            format!("Resilient\\Client: calls nested too deeply (a callback such as on_attempt or fallback calling the client, {left} KiB of C stack left, at least {needed} KiB needed): the call was not made")
        };
        PhpException::new(message, 0, exceptions::runtime_exception())
    })
}

/// What an enclosing `Resilient\Deadline::within` has left.
fn enclosing_remaining() -> Option<Duration> {
    deadline::remaining().map(|s| Duration::from_secs_f64(s.max(0.0)))
}

/// What is left until `until`, handed to the call as an enclosing deadline: the earlier of the
/// client's `deadline` and an enclosing one, counted from before the request was read.
fn left_of(until: Option<Instant>) -> Option<Duration> {
    until.map(|u| u.saturating_duration_since(Instant::now()))
}

/// The Unavailable subclass for an error.
fn kind_of(u: &Unavailable) -> Kind {
    if u.is_deadline_exceeded() {
        Kind::DeadlineExceeded
    } else if u.is_funnel_full() {
        Kind::FunnelFull
    } else if u.is_budget_exhausted() {
        Kind::BudgetExhausted
    } else if u.is_circuit_open() {
        Kind::CircuitOpen
    } else {
        Kind::UpstreamFailed
    }
}

/// Throws the matching subclass with the last Response attached; returns the (no-op) error
/// for the method's `Err`.
fn throw_unavailable(u: Unavailable) -> PhpException {
    let kind = kind_of(&u);
    let code = i32::from(u.last_status());
    let message = u.message().to_string();
    exceptions::throw_with_response(kind, &message, code, last_attempt(u));
    exceptions::error(kind, message, code)
}

/// The last Response, or why the last attempt got none, for the PHP exception.
fn last_attempt(u: Unavailable) -> exceptions::LastAttempt {
    exceptions::LastAttempt {
        failure: u.last_failure().map(FailureKind::as_str),
        response: u.into_last_response().and_then(Response::into_zval_object),
    }
}

/// An Unavailable subclass instance, not thrown (for `pool` results).
fn unavailable_object(u: Unavailable) -> PhpResult<Zval> {
    let kind = kind_of(&u);
    let ce = exceptions::class_entry(kind)
        .ok_or_else(|| PhpException::from("Resilient exceptions are not registered"))?;
    let message = u.message().to_string();
    let code = i64::from(u.last_status());
    let last = last_attempt(u);
    let mut object = ZendObject::new(ce);
    object
        .try_call_method("__construct", vec![&message as &dyn IntoZvalDyn, &code])
        .map_err(PhpException::from)?;
    last.attach(&mut object);
    object.into_zval(false).map_err(PhpException::from)
}

enum OwnedKey {
    Index(i64),
    Name(String),
}

fn key_owned(key: &ArrayKey) -> OwnedKey {
    match key {
        ArrayKey::Long(i) => OwnedKey::Index(*i),
        other => OwnedKey::Name(key_string(other)),
    }
}

/// A pool item's method, path and options, the options as a counted copy (an array, or
/// none): reading them runs PHP code (a `json` body's jsonSerialize, a part's stream wrapper),
/// and options given by reference (`[$method, $path, &$options]`) could be freed meanwhile.
fn pool_item(item: &Zval, label: &str) -> PhpResult<(String, String, Option<Zval>)> {
    let bad = || {
        exceptions::value_error(format!(
            "pool request '{label}': must be [method, path, options?]"
        ))
    };
    let list = item.array().ok_or_else(bad)?;
    // A string that is not UTF-8 is said as such (as `get()` says it), not as a wrong shape.
    let text = |index: i64, what: &str| -> PhpResult<String> {
        let z = list
            .get_index(index)
            .map(Zval::dereference)
            .filter(|z| z.is_string())
            .ok_or_else(bad)?;
        z.str().map(str::to_owned).ok_or_else(|| {
            exceptions::value_error(format!(
                "pool request '{label}': the {what} is not valid UTF-8"
            ))
        })
    };
    let method = text(0, "method")?;
    let path = text(1, "path")?;
    let options = match list.get_index(2).map(Zval::dereference) {
        None => None,
        Some(z) if z.is_null() => None,
        Some(z) if z.is_array() => Some(options::counted(z)),
        Some(_) => return Err(bad()),
    };
    // Nothing beside indexes 0, 1 and 2: options under another key would be dropped unseen.
    if list.len() != 2 + usize::from(list.get_index(2).is_some()) {
        return Err(bad());
    }
    Ok((method, path, options))
}

impl Client {
    /// The callables this client keeps (null where it has none), for the cycle collector
    /// ([`crate::collector`]).
    pub(crate) fn callables(&self) -> [*const Zval; 2] {
        let ptr = |z: &Option<Zval>| z.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
        [ptr(&self.on_attempt), ptr(&self.fallback)]
    }
}

pub fn register(module: ModuleBuilder) -> ModuleBuilder {
    module.class::<Client>()
}

/// `resilient.backend` (`shm` or a Redis URL) for a client without a `backend` option. A bad
/// value set where it could not be refused throws here, naming the setting (never the URL).
fn backend_from_ini() -> PhpResult<BackendKind> {
    crate::ini::check(crate::ini::BACKEND).map_err(exceptions::value_error)?;
    let value = crate::ini::raw(crate::ini::BACKEND).unwrap_or_default();
    if value.trim().is_empty() {
        return Ok(BackendKind::Shm);
    }
    // Checked whole here (the `ca` file read, which the ini check leaves out), and named after
    // the ini setting (the client's option would say `option 'backend'`).
    let named = |problem: &str| exceptions::value_error(format!("resilient.backend: {problem}"));
    let mut config = resilient_http::ClientConfig::default();
    config.set_backend(&value).map_err(|e| named(e.problem()))?;
    if matches!(config.backend, BackendKind::Redis(_)) {
        resilient_redis::Target::parse(&value).map_err(|e| named(e.problem()))?;
    }
    Ok(config.backend)
}

/// The backend a client's options choose: this host's shared memory, or Redis with the
/// shared memory behind it for `on_backend_error => 'local'`; `events` counts fallbacks.
fn choose_backend(
    kind: BackendKind,
    on_backend_error: resilient_http::OnBackendError,
    hosts: u32,
    events: Option<Arc<dyn CallEvents>>,
) -> PhpResult<Box<dyn Backend>> {
    let segment = segment::shared()?;
    let shm = SharedMemory::new(segment.clone()).with_registry(Arc::new(HeldLeases(segment)));
    Ok(match kind {
        BackendKind::Shm => Box::new(shm),
        BackendKind::Redis(url) => {
            let server =
                resilient_redis::Server::shared(url.expose()).map_err(options::config_error)?;
            let mut redis =
                resilient_redis::Redis::new(server, on_backend_error, hosts, Some(Arc::new(shm)));
            if let Some(events) = events {
                redis = redis.with_events(events);
            }
            Box::new(redis)
        }
    })
}

/// The key of `query` that holds a request option's array: `get($path, ['headers' => [...]])`
/// as Guzzle and Symfony take it, where `get()` takes the query (as Laravel's). Sent as a
/// query, the headers, a bearer token among them, or a password (`auth`'s, `cert`'s, a
/// proxy's) would be in the URL and every log of it. Such a parameter is hardly ever meant, so
/// the call is refused; `$options['query']` still sends one.
fn options_mistaken_for_query(query: &ZendHashTable) -> Option<&'static str> {
    [
        "headers",
        "query",
        "json",
        "form",
        "multipart",
        "cert",
        "ssl_key",
        "proxy",
        "form_params",
        "auth",
    ]
    .into_iter()
    .find(|key| query.get(*key).is_some_and(|v| v.dereference().is_array()))
}
