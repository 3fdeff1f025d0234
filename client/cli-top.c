/*
 * cli-top.c: semd-cli top, a live view of one semd. Every interval it
 * asks STATS, LIST and INFO of each semaphore (at most TOP_INFO_MAX), and
 * shows a header (connections, role, persistence, commands/s) and one
 * row per semaphore, sorted by waiters: capacity, used and a bar of it,
 * holders, waiters, grants/s, the wait's p50 and p99, timeouts/s. Rates
 * are deltas of INFO's counters between two samples on the monotonic
 * clock.
 *
 * On a terminal (stdin and stdout) it is full screen, with plain ANSI
 * escapes and the terminal in raw mode: q quits, s changes the sort, /
 * reads a filter on the bottom line. A lost connection is shown in the
 * header and tried again every interval. Otherwise it prints plain text
 * frames, one by default, each after two samples an interval apart, so
 * that the rates are known.
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define TOP_INFO_MAX		500	/* INFO requests per refresh */
#define TOP_INTERVAL_MIN_MS	100
#define TOP_FILTER_MAX		64	/* bytes of a filter */
#define TOP_HEAD_LINES		4	/* above the rows */
#define TOP_BAR_CELLS		8
#define TOP_NAME_MIN		4	/* the name column, at least */
/* The columns after the name: " CAP USED USE HOLD WAIT GRANT/S ...". */
#define TOP_COLS_FMT		" %5s %5s %-8s %5s %5s %7s %6s %6s %6s"
#define TOP_COLS_WIDTH		62

/* One semaphore in a sample: LIST's line, then INFO's extra keys. */
struct top_row {
	struct semc_info info;
	int		 have_info;	/* INFO answered in this sample */
	uint64_t	 p50_ms;
	uint64_t	 p99_ms;
	uint64_t	 grants;	/* grants_total */
	uint64_t	 timeouts;	/* timeouts_total */
	double		 grants_s;	/* < 0: not known */
	double		 timeouts_s;
};

/* What one refresh learnt. */
struct top_sample {
	struct top_row	*rows;		/* by name */
	size_t		 n;
	int64_t		 at_ms;		/* monotonic */
	time_t		 at;		/* wall clock, for the header */
	uint64_t	 commands;	/* STATS commands */
	uint64_t	 sent;		/* our requests sent, STATS included */
	double		 commands_s;	/* others' commands/s; < 0: unknown */
	char		 conns[24];
	char		 role[24];
	char		 persistence[24];
};

enum top_sort {
	TOP_SORT_WAITERS,
	TOP_SORT_USED,
	TOP_SORT_GRANTS,
	TOP_SORT_P99,
	TOP_SORT_NAME,
	TOP_SORT__COUNT
};

struct top {
	struct semc	*c;		/* top's own handle (shorter timeouts) */
	const char	*where;		/* the address, for the header */
	int64_t		 interval_ms;
	uint32_t	 iterations;	/* frames; 0: until q */
	int		 tty;
	enum top_sort	 sort;
	char		 filter[TOP_FILTER_MAX + 1];
	int		 editing;	/* after '/': the bottom line reads */
	char		 edit[TOP_FILTER_MAX + 1];
	size_t		 edit_len;
	int		 quit;
	struct top_sample cur;		/* the last good sample */
	int		 have_cur;
	uint64_t	 sent;		/* requests sent by this handle */
	char		 error[160];	/* the last refresh's failure; "" */
	const struct top_row **view;	/* cur's rows shown, in order */
	size_t		 nview;
	int		 lines, cols;	/* the terminal's size */
	struct termios	 saved;		/* the terminal as found */
};

/* A frame being written: to a memory stream (terminal) or stdout. */
struct top_frame {
	FILE		*f;
	int		 tty;
	int		 width;		/* bytes a line may take; 0: any */
	int		 max_lines;	/* 0: any */
	int		 lines;		/* written so far */
};

static volatile sig_atomic_t	top_winch;	/* SIGWINCH came */
static volatile sig_atomic_t	top_signal;	/* SIGTERM, SIGHUP, SIGINT */

static const char *const top_sort_names[TOP_SORT__COUNT] = {
	"waiters", "used%", "grants/s", "wait p99", "name"
};

static int
top_cmp_name(const void *a, const void *b)
{
	const struct top_row	*x = *(const struct top_row *const *)a;
	const struct top_row	*y = *(const struct top_row *const *)b;

	return (strcmp(x->info.name, y->info.name));
}

/* -1, 0, 1 for a larger, equal, smaller u: for descending orders. */
static int
top_desc(uint64_t u, uint64_t v)
{
	return (u > v ? -1 : u < v);
}

/* Waiters, then used (descending), then name: LIST's own keys. */
static int
top_cmp_waiters(const void *a, const void *b)
{
	const struct top_row	*x = *(const struct top_row *const *)a;
	const struct top_row	*y = *(const struct top_row *const *)b;
	int			 d;

	if ((d = top_desc(x->info.waiters, y->info.waiters)) != 0 ||
	    (d = top_desc(x->info.used, y->info.used)) != 0)
		return (d);
	return (top_cmp_name(a, b));
}

/* used / capacity, descending; used of capacity 0 counts as full. */
static int
top_cmp_used(const void *a, const void *b)
{
	const struct top_row	*x = *(const struct top_row *const *)a;
	const struct top_row	*y = *(const struct top_row *const *)b;
	uint64_t		 xc = x->info.capacity, yc = y->info.capacity;
	uint64_t		 xu = x->info.used, yu = y->info.used;
	int			 d;

	if (xc == 0) {
		xc = 1;
		xu = xu > 0;
	}
	if (yc == 0) {
		yc = 1;
		yu = yu > 0;
	}
	/* used <= 2^32 and capacity < 2^31: the products fit. */
	if ((d = top_desc(xu * yc, yu * xc)) != 0)
		return (d);
	return (top_cmp_waiters(a, b));
}

/* A known value before an unknown one (< 0), larger first. */
static int
top_desc_known(double u, double v)
{
	if ((u < 0) != (v < 0))
		return (u < 0 ? 1 : -1);
	return (u > v ? -1 : u < v);
}

static int
top_cmp_grants(const void *a, const void *b)
{
	const struct top_row	*x = *(const struct top_row *const *)a;
	const struct top_row	*y = *(const struct top_row *const *)b;
	int			 d;

	if ((d = top_desc_known(x->grants_s, y->grants_s)) != 0)
		return (d);
	return (top_cmp_waiters(a, b));
}

static int
top_cmp_p99(const void *a, const void *b)
{
	const struct top_row	*x = *(const struct top_row *const *)a;
	const struct top_row	*y = *(const struct top_row *const *)b;
	int			 d;

	if ((d = top_desc_known(x->have_info ? (double)x->p99_ms : -1,
	    y->have_info ? (double)y->p99_ms : -1)) != 0)
		return (d);
	return (top_cmp_waiters(a, b));
}

static int (*const top_cmps[TOP_SORT__COUNT])(const void *,
    const void *) = {
	top_cmp_waiters, top_cmp_used, top_cmp_grants, top_cmp_p99,
	top_cmp_name
};

/* The rows of s that the filter keeps, in *out (malloc'ed); -1. */
static int
top_select(const struct top *t, const struct top_sample *s,
    const struct top_row ***out, size_t *n)
{
	const struct top_row	**v;
	size_t			  i;

	*n = 0;
	if ((v = calloc(s->n + 1, sizeof(*v))) == NULL)
		return (-1);
	for (i = 0; i < s->n; i++) {
		if (t->filter[0] == '\0' ||
		    strstr(s->rows[i].info.name, t->filter) != NULL)
			v[(*n)++] = &s->rows[i];
	}
	*out = v;
	return (0);
}

/* Rebuild the view of the last sample: filter, then the sort. */
static void
top_view(struct top *t)
{
	const struct top_row	**v;
	size_t			  n;

	if (top_select(t, &t->cur, &v, &n) != 0)
		return;		/* out of memory: keep the old view */
	free(t->view);
	t->view = v;
	t->nview = n;
	qsort(t->view, t->nview, sizeof(*t->view), top_cmps[t->sort]);
}

/* A key of a semc_stat block, copied into buf; "-" when absent. */
static void
top_stat_str(const struct semc_stat *st, size_t n, const char *key,
    char *buf, size_t len)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (strcmp(st[i].key, key) == 0) {
			snprintf(buf, len, "%s", st[i].value);
			return;
		}
	}
	snprintf(buf, len, "-");
}

/* A numeric key of a semc_stat block: 0, or -1 when absent or bad. */
static int
top_stat_u64(const struct semc_stat *st, size_t n, const char *key,
    uint64_t *out)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (strcmp(st[i].key, key) == 0)
			return (cli_parse_token(st[i].value, out));
	}
	return (-1);
}

/* INFO's extra keys into r; a semd without them leaves have_info 0. */
static void
top_row_info(struct top_row *r, const struct semc_stat *st, size_t n)
{
	r->have_info = top_stat_u64(st, n, "wait_p50_ms", &r->p50_ms) == 0 &&
	    top_stat_u64(st, n, "wait_p99_ms", &r->p99_ms) == 0 &&
	    top_stat_u64(st, n, "grants_total", &r->grants) == 0 &&
	    top_stat_u64(st, n, "timeouts_total", &r->timeouts) == 0;
}

/* Counters over the time between two samples; -1 when not comparable. */
static double
top_rate(uint64_t now, uint64_t before, int64_t dt_ms)
{
	if (dt_ms <= 0 || now < before)	/* reset: recreated, restarted */
		return (-1);
	return ((double)(now - before) * 1000.0 / (double)dt_ms);
}

/* The rates of s's rows against the previous sample, matched by name. */
static void
top_rates(const struct top *t, struct top_sample *s)
{
	const struct top_sample	*p = &t->cur;
	const struct top_row	*old;
	struct top_row		*r;
	int64_t			 dt = s->at_ms - p->at_ms;
	size_t			 i, lo, hi, mid;
	int			 d;

	for (i = 0; i < s->n; i++) {
		r = &s->rows[i];
		r->grants_s = r->timeouts_s = -1;
		if (!t->have_cur || !r->have_info)
			continue;
		for (old = NULL, lo = 0, hi = p->n; lo < hi && old == NULL;) {
			mid = lo + (hi - lo) / 2;
			if ((d = strcmp(r->info.name, p->rows[mid].info.name)) ==
			    0)
				old = &p->rows[mid];
			else if (d < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (old == NULL || !old->have_info)
			continue;
		r->grants_s = top_rate(r->grants, old->grants, dt);
		r->timeouts_s = top_rate(r->timeouts, old->timeouts, dt);
	}
	s->commands_s = -1;
	if (t->have_cur && s->commands >= p->commands) {
		uint64_t ours = s->sent - p->sent;
		uint64_t all = s->commands - p->commands;

		s->commands_s = top_rate(all > ours ? all - ours : 0, 0, dt);
	}
}

/* STATS: the header's values. */
static enum semc_err
top_stats(struct top *t, struct top_sample *s)
{
	struct semc_stat	*st;
	enum semc_err		 err;
	size_t			 n;

	t->sent++;
	if ((err = semc_stats(t->c, &st, &n)) != SEMC_OK)
		return (err);
	s->sent = t->sent;
	top_stat_str(st, n, "connections", s->conns, sizeof(s->conns));
	top_stat_str(st, n, "role", s->role, sizeof(s->role));
	top_stat_str(st, n, "persistence", s->persistence,
	    sizeof(s->persistence));
	if (top_stat_u64(st, n, "commands", &s->commands) != 0)
		s->commands = 0;
	free(st);
	return (SEMC_OK);
}

/*
 * INFO of the rows the filter keeps, busiest first by LIST's keys, at
 * most TOP_INFO_MAX. A semaphore deleted since LIST is left without.
 */
static enum semc_err
top_infos(struct top *t, struct top_sample *s)
{
	const struct top_row	**v;
	struct semc_stat	 *st;
	enum semc_err		  err = SEMC_OK;
	size_t			  i, n, k;

	if (top_select(t, s, &v, &n) != 0)
		return (SEMC_ERR_NOMEM);
	qsort(v, n, sizeof(*v), top_cmp_waiters);
	for (i = 0; i < n && i < TOP_INFO_MAX; i++) {
		struct top_row *r = &s->rows[v[i] - s->rows];

		t->sent++;
		err = semc_info_all(t->c, r->info.name, &st, &k);
		if (err == SEMC_ERR_NOSEM) {
			err = SEMC_OK;
			continue;
		}
		if (err != SEMC_OK)
			break;
		top_row_info(r, st, k);
		free(st);
	}
	free(v);
	return (err);
}

/* Rows by name, for the binary search of top_rates. */
static int
top_cmp_row_name(const void *a, const void *b)
{
	return (strcmp(((const struct top_row *)a)->info.name,
	    ((const struct top_row *)b)->info.name));
}

/* LIST into s's rows, by name (LIST's own order, made sure of). */
static enum semc_err
top_list(struct top *t, struct top_sample *s)
{
	struct semc_info	*list;
	enum semc_err		 err;
	size_t			 i, n;

	t->sent++;
	if ((err = semc_list(t->c, &list, &n)) != SEMC_OK)
		return (err);
	if ((s->rows = calloc(n + 1, sizeof(*s->rows))) == NULL) {
		free(list);
		return (SEMC_ERR_NOMEM);
	}
	for (i = 0; i < n; i++)
		s->rows[i].info = list[i];
	s->n = n;
	free(list);
	qsort(s->rows, n, sizeof(*s->rows), top_cmp_row_name);
	return (SEMC_OK);
}

/*
 * One refresh: STATS, LIST, INFOs. On success it becomes the current
 * sample; on failure the current one stays and t->error says why.
 */
static enum semc_err
top_refresh(struct top *t)
{
	struct top_sample	s;
	enum semc_err		err;

	memset(&s, 0, sizeof(s));
	if ((err = top_stats(t, &s)) == SEMC_OK &&
	    (err = top_list(t, &s)) == SEMC_OK)
		err = top_infos(t, &s);
	if (err != SEMC_OK) {
		snprintf(t->error, sizeof(t->error), "%s",
		    err == SEMC_ERR_NOMEM ? semc_strerror(err) :
		    semc_errmsg(t->c));
		free(s.rows);
		return (err);
	}
	s.at_ms = cli_now_ms();
	s.at = time(NULL);
	top_rates(t, &s);
	free(t->cur.rows);
	t->cur = s;
	t->have_cur = 1;
	t->error[0] = '\0';
	top_view(t);
	return (SEMC_OK);
}

/* A count in width bytes: 1234567 as 1.2M when it does not fit. */
static const char *
top_count(char *buf, size_t len, uint64_t v, int width)
{
	static const char	units[] = "kMGTPE";
	double			d = (double)v;
	int			i;

	if (snprintf(buf, len, "%llu", (unsigned long long)v) <= width)
		return (buf);
	for (i = 0; units[i] != '\0'; i++) {
		d /= 1000;
		if (d < 9.95 && width >= 4) {
			snprintf(buf, len, "%.1f%c", d, units[i]);
			return (buf);
		}
		if (d < 999.5) {
			snprintf(buf, len, "%.0f%c", d, units[i]);
			return (buf);
		}
	}
	snprintf(buf, len, "inf");
	return (buf);
}

/* A rate per second: 0.5, 12.3, 1234, 45.6k; "-" when not known. */
static const char *
top_per_s(char *buf, size_t len, double r, int width)
{
	if (r < 0)
		return ("-");
	if (r < 99.95) {
		snprintf(buf, len, "%.1f", r);
		return (buf);
	}
	return (top_count(buf, len, (uint64_t)(r + 0.5), width));
}

/* A wait: 0ms, 250ms, 1.25s, 12.5s, 125s, 35m, 2.5h; "-" when unknown. */
static const char *
top_ms(char *buf, size_t len, const struct top_row *r, uint64_t ms)
{
	double	s = (double)ms / 1000;

	if (!r->have_info)
		return ("-");
	if (ms < 1000)
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	else if (s < 9.995)
		snprintf(buf, len, "%.2fs", s);
	else if (s < 99.95)
		snprintf(buf, len, "%.1fs", s);
	else if (s < 999.5)
		snprintf(buf, len, "%.0fs", s);
	else if (s < 60 * 999.5)
		snprintf(buf, len, "%.0fm", s / 60);
	else
		snprintf(buf, len, "%.0fh", s / 3600);
	return (buf);
}

/* used of capacity as TOP_BAR_CELLS cells: "###....." (any use shows). */
static const char *
top_bar(char *buf, const struct semc_info *in)
{
	uint64_t	cells;

	if (in->capacity == 0)
		cells = in->used > 0 ? TOP_BAR_CELLS : 0;
	else
		cells = (in->used * TOP_BAR_CELLS + in->capacity - 1) /
		    in->capacity;
	if (cells > TOP_BAR_CELLS)
		cells = TOP_BAR_CELLS;
	memset(buf, '#', cells);
	memset(buf + cells, '.', TOP_BAR_CELLS - cells);
	buf[TOP_BAR_CELLS] = '\0';
	return (buf);
}

/*
 * One line of a frame, cut to the width; control bytes (a server's
 * message) are shown as '?'. On the terminal each line clears the rest
 * of its row, and attr (an SGR sequence) spans the whole width.
 */
static void __attribute__((format(printf, 3, 4)))
top_line(struct top_frame *fr, const char *attr, const char *fmt, ...)
{
	char	line[1024];
	va_list	ap;
	int	len, i;

	if (fr->max_lines > 0 && fr->lines >= fr->max_lines)
		return;
	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (len < 0)
		len = 0;
	if ((size_t)len >= sizeof(line))
		len = sizeof(line) - 1;
	if (fr->width > 0 && len > fr->width)
		len = fr->width;
	for (i = 0; i < len; i++) {
		if ((unsigned char)line[i] < 0x20 ||
		    (unsigned char)line[i] >= 0x7f)
			line[i] = '?';
	}
	while (!fr->tty && len > 0 && line[len - 1] == ' ')
		len--;
	if (!fr->tty)
		fprintf(fr->f, "%.*s\n", len, line);
	else if (attr != NULL)
		fprintf(fr->f, "%s%s%-*.*s\033[m", fr->lines > 0 ? "\r\n" : "",
		    attr, fr->width, len, line);
	else
		fprintf(fr->f, "%s%.*s\033[K", fr->lines > 0 ? "\r\n" : "",
		    len, line);
	fr->lines++;
}

/* The header: where, when, the server's state, the sort and filter. */
static void
top_header(const struct top *t, struct top_frame *fr)
{
	const struct top_sample	*s = &t->cur;
	char			 when[16] = "--:--:--", cs[16];
	struct tm		 tm;

	if (t->have_cur && localtime_r(&s->at, &tm) != NULL)
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
	top_line(fr, NULL, "semd top - %s - %s - every %.1fs - sort: %s",
	    t->where, when, (double)t->interval_ms / 1000,
	    top_sort_names[t->sort]);
	top_line(fr, NULL, "role %s  persistence %s  connections %s  "
	    "commands/s %s  semaphores %zu", t->have_cur ? s->role : "-",
	    t->have_cur ? s->persistence : "-", t->have_cur ? s->conns : "-",
	    top_per_s(cs, sizeof(cs), s->commands_s, 7), s->n);
	if (t->error[0] != '\0')
		top_line(fr, NULL, "stale, retrying: %s", t->error);
	else if (t->filter[0] != '\0')
		top_line(fr, NULL, "filter: %s (%zu of %zu)", t->filter,
		    t->nview, s->n);
	else if (t->tty)
		top_line(fr, NULL, "%s", "");
}

/* The column titles and the rows, the name column fitting the width. */
static void
top_rows(const struct top *t, struct top_frame *fr)
{
	const struct top_row	*r;
	char			 cap[16], used[16], bar[TOP_BAR_CELLS + 1];
	char			 hold[16], wait[16], gs[16], p50[16], p99[16];
	char			 ts[16];
	size_t			 i;
	int			 w = TOP_NAME_MIN;

	if (fr->width > 0 && fr->width - TOP_COLS_WIDTH > w)
		w = fr->width - TOP_COLS_WIDTH;
	for (i = 0; fr->width == 0 && i < t->nview; i++) {
		if ((int)strlen(t->view[i]->info.name) > w)
			w = (int)strlen(t->view[i]->info.name);
	}
	top_line(fr, "\033[7m", "%-*s" TOP_COLS_FMT, w, "NAME", "CAP", "USED",
	    "USE", "HOLD", "WAIT", "GRANT/S", "P50", "P99", "TMO/S");
	for (i = 0; i < t->nview; i++) {
		r = t->view[i];
		top_line(fr, NULL, "%-*.*s" TOP_COLS_FMT, w, w, r->info.name,
		    top_count(cap, sizeof(cap), r->info.capacity, 5),
		    top_count(used, sizeof(used), r->info.used, 5),
		    top_bar(bar, &r->info),
		    top_count(hold, sizeof(hold), r->info.holders, 5),
		    top_count(wait, sizeof(wait), r->info.waiters, 5),
		    top_per_s(gs, sizeof(gs), r->grants_s, 7),
		    top_ms(p50, sizeof(p50), r, r->p50_ms),
		    top_ms(p99, sizeof(p99), r, r->p99_ms),
		    top_per_s(ts, sizeof(ts), r->timeouts_s, 6));
	}
}

/* Write all of buf to the terminal. */
static void
top_write(const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		if ((n = write(STDOUT_FILENO, buf, len)) == -1) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

static void
top_puts(const char *s)
{
	top_write(s, strlen(s));
}

/*
 * The whole screen, written at once: header and rows from the top left,
 * the keys (or the filter being typed) on the last line.
 */
static void
top_draw(const struct top *t)
{
	struct top_frame	 fr;
	char			*buf = NULL;
	size_t			 len = 0;

	memset(&fr, 0, sizeof(fr));
	if ((fr.f = open_memstream(&buf, &len)) == NULL)
		return;
	fr.tty = 1;
	fr.width = t->cols - 1;		/* the last column never wraps */
	fr.max_lines = t->lines - 1;
	fputs("\033[H", fr.f);
	top_header(t, &fr);
	top_rows(t, &fr);
	fprintf(fr.f, "\033[J\033[%d;1H", t->lines);
	fr.max_lines = 0;
	fr.lines = 0;
	if (t->editing) {
		top_line(&fr, NULL, "filter (Enter applies, empty clears, Esc "
		    "cancels): %s", t->edit);
		fputs("\033[?25h", fr.f);
	} else {
		top_line(&fr, NULL, "q quit  s sort (%s)  / filter",
		    top_sort_names[t->sort]);
		fputs("\033[?25l", fr.f);
	}
	if (fclose(fr.f) == 0)
		top_write(buf, len);
	free(buf);
}

/* A plain frame on stdout, for a pipe or a file. */
static void
top_print(const struct top *t)
{
	struct top_frame	fr;

	memset(&fr, 0, sizeof(fr));
	fr.f = stdout;
	top_header(t, &fr);
	top_rows(t, &fr);
	fflush(stdout);
}

/* The terminal's size; 80x24 when it does not say. */
static void
top_size(struct top *t)
{
	struct winsize	ws;

	t->lines = 24;
	t->cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
	    ws.ws_col > 0) {
		t->lines = ws.ws_row;
		t->cols = ws.ws_col;
	}
	if (t->lines < 2)
		t->lines = 2;
	if (t->cols < 2)
		t->cols = 2;
}

static void
top_on_signal(int sig)
{
	if (sig == SIGWINCH)
		top_winch = 1;
	else
		top_signal = sig;
}

/* Raw mode, the alternate screen, our signals; -1 if not a terminal. */
static int
top_screen_enter(struct top *t)
{
	struct termios		raw;
	struct sigaction	sa;

	if (tcgetattr(STDIN_FILENO, &t->saved) != 0)
		return (-1);
	raw = t->saved;
	raw.c_lflag &= ~(ICANON | ECHO | ISIG | IEXTEN);
	raw.c_iflag &= ~(IXON | ICRNL);
	raw.c_oflag &= ~OPOST;		/* our "\r\n" as written */
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
		return (-1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = top_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	top_puts("\033[?1049h\033[?25l\033[H\033[2J");
	return (0);
}

/* The terminal as it was: main screen, cursor, modes, signals. */
static void
top_screen_leave(struct top *t)
{
	top_puts("\033[?25h\033[?1049l");
	(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	signal(SIGWINCH, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGINT, SIG_DFL);
}

#define TOP_CTRL(c)	((c) & 0x1f)
#define TOP_ESC		0x1b

/* The length of the escape sequence at p (ESC [ ... final), at most n. */
static size_t
top_escape_len(const unsigned char *p, size_t n)
{
	size_t	i;

	if (n < 2 || (p[1] != '[' && p[1] != 'O'))
		return (1);
	for (i = 2; i < n; i++) {
		if (p[i] >= 0x40 && p[i] <= 0x7e)
			return (i + 1);
	}
	return (n);
}

/* A key while the filter is typed on the bottom line. */
static void
top_edit_key(struct top *t, unsigned char ch)
{
	if (ch == '\r' || ch == '\n') {
		memcpy(t->filter, t->edit, t->edit_len + 1);
		t->editing = 0;
		top_view(t);
	} else if (ch == 0x7f || ch == TOP_CTRL('H')) {
		if (t->edit_len > 0)
			t->edit[--t->edit_len] = '\0';
	} else if (ch == TOP_CTRL('U')) {
		t->edit_len = 0;
		t->edit[0] = '\0';
	} else if (ch >= 0x20 && ch < 0x7f && t->edit_len < TOP_FILTER_MAX) {
		t->edit[t->edit_len++] = (char)ch;
		t->edit[t->edit_len] = '\0';
	}
}

/* The keys read: q quits, s sorts, / edits the filter. */
static void
top_keys(struct top *t, const unsigned char *p, size_t n)
{
	size_t	i, skip;

	for (i = 0; i < n && !t->quit; i++) {
		if (p[i] == TOP_CTRL('C')) {
			t->quit = 1;
		} else if (p[i] == TOP_ESC) {
			/* Alone it cancels the filter; arrows do nothing. */
			skip = top_escape_len(p + i, n - i);
			if (skip == 1)
				t->editing = 0;
			i += skip - 1;
		} else if (t->editing)
			top_edit_key(t, p[i]);
		else if (p[i] == 'q' || p[i] == 'Q')
			t->quit = 1;
		else if (p[i] == 's') {
			t->sort = (t->sort + 1) % TOP_SORT__COUNT;
			top_view(t);
		} else if (p[i] == 'S') {
			t->sort = (t->sort + TOP_SORT__COUNT - 1) %
			    TOP_SORT__COUNT;
			top_view(t);
		} else if (p[i] == '/') {
			t->editing = 1;
			memcpy(t->edit, t->filter, sizeof(t->edit));
			t->edit_len = strlen(t->edit);
		}
	}
}

/* The full-screen view until q, a signal, or -n frames. */
static int
top_live(struct top *t)
{
	struct pollfd	pfd;
	unsigned char	buf[64];
	uint32_t	frames = 1;
	int64_t		next = cli_now_ms() + t->interval_ms, now, wait;
	ssize_t		n;
	int		redraw = 1, sig;

	top_size(t);
	if (top_screen_enter(t) != 0)
		return (-1);
	while (!t->quit && !top_signal) {
		if ((now = cli_now_ms()) >= next) {
			if (t->iterations > 0 && frames >= t->iterations)
				break;
			(void)top_refresh(t);
			frames++;
			next = cli_now_ms() + t->interval_ms;
			redraw = 1;
		}
		if (top_winch) {
			top_winch = 0;
			top_size(t);
			redraw = 1;
		}
		if (redraw)
			top_draw(t);
		redraw = 0;
		wait = next - cli_now_ms();
		pfd.fd = STDIN_FILENO;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, wait > 0 ? (int)wait : 0) <= 0)
			continue;	/* time, or EINTR: a signal */
		if ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0) {
			top_keys(t, buf, (size_t)n);
			redraw = 1;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN))
			t->quit = 1;	/* the terminal is gone */
	}
	top_screen_leave(t);
	if ((sig = top_signal) != 0)
		raise(sig);	/* as if we had not caught it */
	return (0);
}

/* Sleep ms, or less if a signal comes. */
static void
top_sleep(int64_t ms)
{
	(void)poll(NULL, 0, ms > 0 ? (int)ms : 0);
}

/*
 * Plain frames: each after a sample one interval after the one before,
 * so that rates are known. A failed refresh is reported and the next
 * one tried; the exit status is the worst seen.
 */
static int
top_plain(struct cli *cli, struct top *t)
{
	enum semc_err	err;
	uint32_t	i, frames = t->iterations > 0 ? t->iterations : 1;
	int		rc = CLI_EXIT_OK;

	for (i = 0; i < frames; i++) {
		top_sleep(t->interval_ms);
		if ((err = top_refresh(t)) != SEMC_OK) {
			rc = cli_exit_worse(rc, cli_fail_on(cli, t->c, err));
			continue;
		}
		if (i > 0)
			putchar('\n');
		top_print(t);
	}
	return (rc);
}

/* The address top shows: as the options say, or semd-cli's default. */
static const char *
top_where(const struct semc_opts *o, char *buf, size_t len)
{
	const char	*env = getenv("SEMD_HOSTS");

	if (o->unix_path != NULL)
		return (o->unix_path);
	if (o->hosts != NULL)
		return (o->hosts);
	if (o->host == NULL && env != NULL && *env != '\0')
		return (env);
	snprintf(buf, len, "%s:%d", o->host != NULL ? o->host : "127.0.0.1",
	    o->port != 0 ? o->port : SEMC_DEFAULT_PORT);
	return (buf);
}

/* top's own options: -i/--interval D, -n/--iterations N. */
static int
top_options(const struct cli_args *a, struct top *t)
{
	const char	*v;
	int		 i;

	for (i = 0; i < a->argc; i++) {
		if ((v = cli_optval("-i", a->argc, a->argv, &i)) != NULL ||
		    (v = cli_optval("--interval", a->argc, a->argv, &i)) !=
		    NULL) {
			if (cli_parse_duration(v, &t->interval_ms) != 0 ||
			    t->interval_ms < TOP_INTERVAL_MIN_MS) {
				cli_usage_error("top: --interval: invalid "
				    "duration '%s' (seconds, or a number with "
				    "a unit: 1, 2.5s, 500ms; at least %dms)", v,
				    TOP_INTERVAL_MIN_MS);
				return (-1);
			}
		} else if ((v = cli_optval("-n", a->argc, a->argv, &i)) !=
		    NULL || (v = cli_optval("--iterations", a->argc, a->argv,
		    &i)) != NULL) {
			if (cli_parse_u32(v, 1, &t->iterations) != 0) {
				cli_usage_error("top: --iterations: expected "
				    "1..2147483647, not '%s'", v);
				return (-1);
			}
		} else {
			cli_usage_error("top: unknown argument '%s'",
			    a->argv[i]);
			return (-1);
		}
	}
	return (0);
}

int
cli_top(struct cli *cli, const struct cli_args *a)
{
	struct semc_opts	 opts = cli->opts;
	struct top		 t;
	enum semc_err		 err;
	char			 where[300];
	int			 rc;

	memset(&t, 0, sizeof(t));
	t.interval_ms = 1000;
	if (top_options(a, &t) != 0)
		return (CLI_EXIT_USAGE);
	if (cli->interactive) {
		cli_usage_error("top: not at the prompt nor from a pipe; run "
		    "'semd-cli top'");
		return (CLI_EXIT_USAGE);
	}
	if (cli->json) {
		cli_usage_error("top: no --json (stats --json and list --json "
		    "give the numbers)");
		return (CLI_EXIT_USAGE);
	}
	/*
	 * A handle of its own, so that a dead semd or a failover freezes
	 * the screen for seconds, not for the defaults' tens of seconds.
	 */
	opts.connect_timeout_ms = 2000;
	opts.io_timeout_ms = 5000;
	opts.failover_timeout_ms = -1;
	if ((t.c = semc_new(&opts)) == NULL) {
		fprintf(stderr, "semd-cli: out of memory\n");
		return (CLI_EXIT_SERVER);
	}
	t.where = top_where(&opts, where, sizeof(where));
	t.tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	/* The first sample: when it fails, nothing else is tried. */
	if ((err = top_refresh(&t)) != SEMC_OK)
		rc = cli_fail_on(cli, t.c, err);
	else if (!t.tty || (rc = top_live(&t)) != 0)
		rc = top_plain(cli, &t);
	free(t.cur.rows);
	free(t.view);
	semc_free(t.c);
	return (rc);
}
