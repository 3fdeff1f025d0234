/*
 * semload.c: a load generator for semd and for the Redis anchors it is
 * compared with (make bench; see tests/bench/bench_semload.py).
 *
 *   semload [options] semd|ping|lua
 *
 * One thread, one libevent loop, N connections in a closed loop: each
 * takes a permit (ACQUIRE; or TRY pipelined K deep; or the Lua script of
 * the npm package redis-semaphore, retried after a pause), holds it,
 * releases it, thinks, and starts again; or, for `ping`, sends Redis PING
 * after PING. After a warm-up it counts for a while and prints one JSON
 * line (stdout) and one human line (stderr): pairs/s, latency percentiles
 * from log-spaced histograms, and the hand-off latency (RELEASE sent ->
 * the grant it freed read by a waiting client) when clients contend,
 * and how many connections starved (waited through the whole window: an
 * acquire latency histogram only holds the waits that ended). It asserts nothing about speed; it exits 1 when a reply is unexpected
 * (ERR, a lost connection), because then the figures mean nothing.
 */
#include <sys/resource.h>
#include <sys/time.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "semload.h"

/* Connections being opened at once: semd listens with a backlog of 511. */
#define LOAD_CONNECT_WINDOW	128
/* Descriptors kept beyond one per connection (stdio, the event base). */
#define LOAD_SPARE_FDS		32

static struct load	 L;
static const struct load_ops *ops;
static struct event	*phase_ev;

uint64_t
load_now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec);
}

int
load_counting(const struct load *l)
{
	return (l->phase == PHASE_MEASURE);
}

void
load_tv(double ms, struct timeval *tv)
{
	uint64_t	us = (uint64_t)(ms * 1000.0 + 0.5);

	tv->tv_sec = (time_t)(us / 1000000);
	tv->tv_usec = (suseconds_t)(us % 1000000);
}

void
load_fatal(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "semload: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Hand-off is measured only when clients must wait for each other. */
static int
load_contended(const struct load *l)
{
	return (l->o.pipeline == 0 && l->o.target != TARGET_PING &&
	    l->o.conns > l->o.limit);
}

void
load_attempt(struct load *l, int first)
{
	if (first)
		l->acquiring++;
	if (load_counting(l))
		l->attempts++;
}

void
load_refused(struct load *l, int gave_up)
{
	if (gave_up)
		l->acquiring--;
	if (load_counting(l))
		l->refusals++;
}

/*
 * Hand-off: a grant read after a RELEASE sent under contention is paired
 * with the oldest unpaired such RELEASE (FIFO, as semd hands permits to its
 * waiters in order), and the time between them recorded. The first limit
 * grants of the run are not hand-offs (the permits were free), and a grant
 * whose acquire began after the oldest RELEASE was sent did not wait for
 * it: that permit went to a newcomer (the Lua semaphore has no queue; semd
 * only when no one was waiting), so the RELEASE is dropped unrecorded. For
 * the Lua semaphore a hand-off thus spans retries and pauses.
 */
void
load_granted(struct load *l, uint64_t t0, uint64_t now)
{
	uint64_t	t_rel;

	l->acquiring--;
	if (++l->held > l->max_held)
		l->max_held = l->held;
	if (load_counting(l))
		hist_add(&l->acquire, now - t0);
	if (++l->grants <= (uint64_t)l->o.limit || l->relq_len == 0)
		return;
	t_rel = l->relq[l->relq_head];
	l->relq_head = (l->relq_head + 1) % l->relq_cap;
	l->relq_len--;
	if (t0 > t_rel)
		l->handoff_skipped++;
	else if (load_counting(l))
		hist_add(&l->handoff, now - t_rel);
}

void
load_release_sent(struct load *l, uint64_t now)
{
	l->held--;
	if (!load_contended(l) || l->acquiring == 0)
		return;
	if (l->relq_len == l->relq_cap) {	/* drop the oldest */
		l->relq_head = (l->relq_head + 1) % l->relq_cap;
		l->relq_len--;
		l->relq_dropped++;
	}
	l->relq[(l->relq_head + l->relq_len) % l->relq_cap] = now;
	l->relq_len++;
}

void
load_released(struct load *l, uint64_t t0, uint64_t now)
{
	if (!load_counting(l))
		return;
	hist_add(&l->release, now - t0);
	l->pairs++;
}

/* VmRSS of pid in kB, or -1. */
static long
load_rss_kb(int pid)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 kb = -1;

	if (pid <= 0)
		return (-1);
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return (kb);
}

static void
load_phase_cb(evutil_socket_t fd, short what, void *arg)
{
	struct load	*l = arg;
	struct timeval	 tv;

	(void)fd;
	(void)what;
	switch (l->phase) {
	case PHASE_CONNECT:
		load_fatal("%d of %d connections ready after %g s",
		    l->ready, l->o.conns, l->o.connect_timeout_s);
	case PHASE_WARMUP:
		l->phase = PHASE_MEASURE;
		l->t_measure_ns = load_now_ns();
		load_tv(l->o.duration_s * 1000, &tv);
		evtimer_add(phase_ev, &tv);
		break;
	case PHASE_MEASURE:
		l->t_end_ns = load_now_ns();
		l->phase = PHASE_DONE;
		l->rss_end_kb = load_rss_kb(l->o.rss_pid);
		event_base_loopbreak(l->base);
		break;
	case PHASE_DONE:
		break;
	}
}

/* Open connections until LOAD_CONNECT_WINDOW are in progress. */
static void
load_connect_more(struct load *l)
{
	while (l->connecting < LOAD_CONNECT_WINDOW &&
	    l->next_connect < l->o.conns) {
		l->connecting++;
		if (ops->connect(l, l->next_connect++) == -1)
			exit(1);
	}
}

void
load_ready(struct load *l)
{
	struct timeval	tv;

	l->connecting--;
	l->ready++;
	if (l->ready < l->o.conns) {
		load_connect_more(l);
		return;
	}
	l->rss_ready_kb = load_rss_kb(l->o.rss_pid);
	evtimer_del(phase_ev);
	l->phase = PHASE_WARMUP;
	ops->start(l);
	load_tv(l->o.warmup_s * 1000, &tv);
	evtimer_add(phase_ev, &tv);
}

/* Raise RLIMIT_NOFILE to what conns need; exits when the hard limit is
 * too low. */
static void
load_raise_nofile(int conns)
{
	struct rlimit	rl;
	rlim_t		want = (rlim_t)conns + LOAD_SPARE_FDS;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		load_fatal("getrlimit: %s", strerror(errno));
	if (rl.rlim_cur >= want)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		load_fatal("%d connections need %llu file descriptors; the hard "
		    "limit (ulimit -Hn) is %llu: raise it (as root: ulimit -Hn "
		    "%llu, or LimitNOFILE / limits.conf)", conns,
		    (unsigned long long)want, (unsigned long long)rl.rlim_max,
		    (unsigned long long)want);
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		load_fatal("setrlimit(RLIMIT_NOFILE, %llu): %s",
		    (unsigned long long)want, strerror(errno));
}

static void
usage(void)
{
	fprintf(stderr,
"usage: semload [options] semd|ping|lua\n"
"  -h, --host ADDR          server address (127.0.0.1)\n"
"  -p, --port PORT          server port (required)\n"
"  -c, --conns N            connections (50)\n"
"  -s, --sem NAME           semaphore name, or the Lua ZSET key (bench)\n"
"  -l, --limit N            capacity (10); semd: CREATEd unless --no-create\n"
"  -P, --pipeline K         semd: K TRY+RELEASE pairs in flight per\n"
"                           connection instead of ACQUIRE+RELEASE (0)\n"
"  -H, --hold-ms MS         hold each permit MS before RELEASE (0)\n"
"  -T, --think-ms MS        pause after each RELEASE (0)\n"
"  -r, --retry-ms MS        lua: pause before retrying a refusal (10)\n"
"      --lock-timeout-ms MS lua: holders older than this expire (10000)\n"
"  -w, --warmup S           seconds of load before counting (1)\n"
"  -d, --duration S         seconds counted (5)\n"
"      --connect-timeout S  all connections ready within S (60)\n"
"      --rss-pid PID        report this process's VmRSS before, once\n"
"                           connected and at the end (the server's)\n"
"      --no-create          semd: the semaphore exists already\n"
"      --label TEXT         copied into the JSON line\n");
	exit(2);
}

static double
opt_num(const char *s, const char *what, double min, double max)
{
	char	*end;
	double	 v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max))
		load_fatal("bad %s %s (%g to %g)", what, s, min, max);
	return (v);
}

static void
load_options(struct load_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "conns", required_argument, NULL, 'c' },
		{ "sem", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'l' },
		{ "pipeline", required_argument, NULL, 'P' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "think-ms", required_argument, NULL, 'T' },
		{ "retry-ms", required_argument, NULL, 'r' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "duration", required_argument, NULL, 'd' },
		{ "lock-timeout-ms", required_argument, NULL, 1 },
		{ "connect-timeout", required_argument, NULL, 2 },
		{ "rss-pid", required_argument, NULL, 3 },
		{ "no-create", no_argument, NULL, 4 },
		{ "label", required_argument, NULL, 5 },
		{ NULL, 0, NULL, 0 }
	};
	int	ch;

	o->host = "127.0.0.1";
	o->conns = 50;
	o->sem = "bench";
	o->limit = 10;
	o->retry_ms = 10;
	o->lock_timeout_ms = 10000;
	o->warmup_s = 1;
	o->duration_s = 5;
	o->connect_timeout_s = 60;
	o->create = 1;
	o->label = "";
	while ((ch = getopt_long(argc, argv, "h:p:c:s:l:P:H:T:r:w:d:",
	    longopts, NULL)) != -1) {
		switch (ch) {
		case 'h': o->host = optarg; break;
		case 'p': o->port = (int)opt_num(optarg, "port", 1, 65535);
			break;
		case 'c': o->conns = (int)opt_num(optarg, "conns", 1, 1000000);
			break;
		case 's': o->sem = optarg; break;
		case 'l': o->limit = (long)opt_num(optarg, "limit", 1,
			    2147483647.0);
			break;
		case 'P': o->pipeline = (int)opt_num(optarg, "pipeline", 0,
			    100000);
			break;
		case 'H': o->hold_ms = opt_num(optarg, "hold", 0, 1e7); break;
		case 'T': o->think_ms = opt_num(optarg, "think", 0, 1e7); break;
		case 'r': o->retry_ms = opt_num(optarg, "retry", 0, 1e7); break;
		case 'w': o->warmup_s = opt_num(optarg, "warmup", 0, 1e5); break;
		case 'd': o->duration_s = opt_num(optarg, "duration", 0.01,
			    1e5);
			break;
		case 1: o->lock_timeout_ms = (long)opt_num(optarg,
			    "lock timeout", 1, 2147483647.0);
			break;
		case 2: o->connect_timeout_s = opt_num(optarg,
			    "connect timeout", 0.1, 1e5);
			break;
		case 3: o->rss_pid = (int)opt_num(optarg, "pid", 1, 1e9); break;
		case 4: o->create = 0; break;
		case 5: o->label = optarg; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || o->port == 0)
		usage();
	if (strcmp(argv[optind], "semd") == 0)
		o->target = TARGET_SEMD;
	else if (strcmp(argv[optind], "ping") == 0)
		o->target = TARGET_PING;
	else if (strcmp(argv[optind], "lua") == 0)
		o->target = TARGET_LUA;
	else
		usage();
	if (o->pipeline > 0 && o->target != TARGET_SEMD)
		load_fatal("--pipeline is for the semd target");
	if (o->pipeline > 0 && (o->hold_ms > 0 || o->think_ms > 0))
		load_fatal("--pipeline has no hold or think time");
}

/* JSON number in microseconds for a quantile, or null when empty. */
static void
json_us(FILE *f, const char *key, const struct hist *h, double q)
{
	if (h->n == 0)
		fprintf(f, ",\"%s\":null", key);
	else
		fprintf(f, ",\"%s\":%.1f", key, hist_quantile(h, q) / 1000);
}

static void
json_hist(FILE *f, const char *name, const struct hist *h)
{
	char	key[64];

	snprintf(key, sizeof(key), "%s_p50_us", name);
	json_us(f, key, h, 0.50);
	snprintf(key, sizeof(key), "%s_p99_us", name);
	json_us(f, key, h, 0.99);
	snprintf(key, sizeof(key), "%s_p999_us", name);
	json_us(f, key, h, 0.999);
	fprintf(f, ",\"%s_mean_us\":%.1f,\"%s_n\":%llu", name,
	    hist_mean(h) / 1000, name, (unsigned long long)h->n);
}

/* The JSON string s, escaped. */
static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void
load_report(const struct load *l)
{
	const struct load_opts	*o = &l->o;
	double			 secs, rate;
	const char		*mode;
	int			 starved = ops->starved(l);

	secs = (double)(l->t_end_ns - l->t_measure_ns) / 1e9;
	rate = (double)(o->target == TARGET_PING ? l->ops : l->pairs) / secs;
	mode = o->target == TARGET_PING ? "ping" : o->target == TARGET_LUA ?
	    "lua" : o->pipeline > 0 ? "try-pipelined" : "acquire";

	printf("{\"target\":\"%s\",\"mode\":\"%s\",\"label\":", ops->name,
	    mode);
	json_str(stdout, o->label);
	printf(",\"conns\":%d,\"limit\":%ld,\"pipeline\":%d,"
	    "\"hold_ms\":%g,\"think_ms\":%g,\"seconds\":%.3f",
	    o->conns, o->limit, o->pipeline, o->hold_ms, o->think_ms, secs);
	if (o->target == TARGET_LUA)
		printf(",\"retry_ms\":%g", o->retry_ms);
	if (o->target == TARGET_PING) {
		printf(",\"ops\":%llu,\"ops_per_s\":%.0f",
		    (unsigned long long)l->ops, rate);
		json_hist(stdout, "lat", &l->ping);
	} else {
		printf(",\"pairs\":%llu,\"pairs_per_s\":%.0f,"
		    "\"attempts\":%llu,\"refusals\":%llu,\"max_held\":%d,"
		    "\"starved\":%d",
		    (unsigned long long)l->pairs, rate,
		    (unsigned long long)l->attempts,
		    (unsigned long long)l->refusals, l->max_held, starved);
		json_hist(stdout, "acquire", &l->acquire);
		json_hist(stdout, "release", &l->release);
		if (load_contended(l)) {
			json_hist(stdout, "handoff", &l->handoff);
			printf(",\"handoff_dropped\":%llu,"
			    "\"handoff_skipped\":%llu",
			    (unsigned long long)l->relq_dropped,
			    (unsigned long long)l->handoff_skipped);
		}
	}
	if (o->rss_pid > 0) {
		printf(",\"rss_before_kb\":%ld,\"rss_ready_kb\":%ld,"
		    "\"rss_end_kb\":%ld", l->rss_before_kb, l->rss_ready_kb,
		    l->rss_end_kb);
		if (l->rss_before_kb > 0 && l->rss_ready_kb > 0)
			printf(",\"rss_per_conn_b\":%.0f,"
			    "\"rss_per_conn_end_b\":%.0f",
			    (double)(l->rss_ready_kb - l->rss_before_kb) *
			    1024 / o->conns,
			    (double)(l->rss_end_kb - l->rss_before_kb) *
			    1024 / o->conns);
	}
	printf("}\n");
	fflush(stdout);

	if (o->target == TARGET_PING) {
		fprintf(stderr, "ping conns=%d: %.0f PING/s; latency p50 %.3f "
		    "ms p99 %.3f ms p99.9 %.3f ms\n", o->conns, rate,
		    hist_quantile(&l->ping, 0.5) / 1e6,
		    hist_quantile(&l->ping, 0.99) / 1e6,
		    hist_quantile(&l->ping, 0.999) / 1e6);
		return;
	}
	fprintf(stderr, "%s %s conns=%d limit=%ld", ops->name, mode,
	    o->conns, o->limit);
	if (o->pipeline > 0)
		fprintf(stderr, " pipeline=%d", o->pipeline);
	if (o->target == TARGET_LUA)
		fprintf(stderr, " retry=%gms", o->retry_ms);
	fprintf(stderr, ": %.0f pairs/s; acquire p50 %.3f ms p99 %.3f ms "
	    "p99.9 %.3f ms; release p50 %.3f ms", rate,
	    hist_quantile(&l->acquire, 0.5) / 1e6,
	    hist_quantile(&l->acquire, 0.99) / 1e6,
	    hist_quantile(&l->acquire, 0.999) / 1e6,
	    hist_quantile(&l->release, 0.5) / 1e6);
	if (load_contended(l))
		fprintf(stderr, "; hand-off p50 %.3f ms p99 %.3f ms",
		    hist_quantile(&l->handoff, 0.5) / 1e6,
		    hist_quantile(&l->handoff, 0.99) / 1e6);
	if (l->refusals > 0)
		fprintf(stderr, "; %.2f requests per grant",
		    l->pairs ? (double)l->attempts / (double)l->pairs : 0);
	if (starved > 0)
		fprintf(stderr, "; %d connections starved (no grant in the "
		    "window)", starved);
	fprintf(stderr, "; max held %d\n", l->max_held);
	if (o->rss_pid > 0 && l->rss_before_kb > 0)
		fprintf(stderr, "server RSS %ld kB before, %ld kB with %d "
		    "connections (%.0f B each), %ld kB at the end\n",
		    l->rss_before_kb, l->rss_ready_kb, o->conns,
		    (double)(l->rss_ready_kb - l->rss_before_kb) * 1024 /
		    o->conns, l->rss_end_kb);
}

int
main(int argc, char **argv)
{
	struct load		*l = &L;
	struct event_config	*cfg;
	struct timeval		 tv;

	load_options(&l->o, argc, argv);
	switch (l->o.target) {
	case TARGET_SEMD: ops = &load_semd_ops; break;
	case TARGET_PING: ops = &load_ping_ops; break;
	case TARGET_LUA: ops = &load_lua_ops; break;
	}
	signal(SIGPIPE, SIG_IGN);
	load_raise_nofile(l->o.conns);
	hist_init(&l->acquire);
	hist_init(&l->release);
	hist_init(&l->handoff);
	hist_init(&l->ping);
	l->relq_cap = (unsigned)l->o.conns * 2;
	if ((l->relq = calloc(l->relq_cap, sizeof(*l->relq))) == NULL)
		load_fatal("out of memory");
	/* timerfd on Linux: hold, think and retry pauses of 1 ms are 1 ms,
	 * not rounded up to epoll's millisecond ticks. */
	if ((cfg = event_config_new()) == NULL)
		load_fatal("event_config_new failed");
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	l->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (l->base == NULL)
		load_fatal("event_base_new failed");
	if (ops->prepare(l) == -1)
		exit(1);

	l->rss_before_kb = load_rss_kb(l->o.rss_pid);
	phase_ev = evtimer_new(l->base, load_phase_cb, l);
	load_tv(l->o.connect_timeout_s * 1000, &tv);
	evtimer_add(phase_ev, &tv);
	load_connect_more(l);
	event_base_dispatch(l->base);
	if (l->phase != PHASE_DONE)
		load_fatal("the event loop ended early");

	load_report(l);
	ops->stop(l);
	event_free(phase_ev);
	event_base_free(l->base);
	free(l->relq);
	return (0);
}
