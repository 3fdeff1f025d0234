/*
 * cli-out.c: semd-cli's output, readable text by default and one JSON
 * value per command with --json. Text is made for both eyes and shell:
 * a token alone on its line, key=value lines as semd sends them, and
 * tables with a header for listings.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

void
cli_json_str(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		unsigned char	ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* A lease's time left as JSON (null for bound) or text ("-"). */
static void
cli_out_ttl(struct cli *cli, int64_t ttl_ms)
{
	if (ttl_ms >= 0)
		printf("%lld", (long long)ttl_ms);
	else
		fputs(cli->json ? "null" : "-", stdout);
}

void
cli_out_ok(struct cli *cli, const char *text)
{
	if (cli->json)
		printf("{\"ok\":true}\n");
	else
		printf("%s\n", text);
}

void
cli_out_token(struct cli *cli, uint64_t token)
{
	if (cli->json)
		printf("{\"token\":%llu}\n", (unsigned long long)token);
	else
		printf("%llu\n", (unsigned long long)token);
}

/* INFO (n < 0: a single object or line) or LIST (n rows). */
void
cli_out_info(struct cli *cli, const struct semc_info *info, int n)
{
	int	i, rows = n < 0 ? 1 : n;

	if (cli->json && n >= 0)
		putchar('[');
	if (!cli->json && n >= 0)
		printf("%-24s %10s %10s %10s %8s %8s\n", "NAME", "CAPACITY",
		    "USED", "AVAILABLE", "HOLDERS", "WAITERS");
	for (i = 0; i < rows; i++) {
		const struct semc_info *s = &info[i];

		if (cli->json) {
			printf("%s{\"name\":", i > 0 ? "," : "");
			cli_json_str(s->name);
			printf(",\"capacity\":%u,\"used\":%llu,\"available\":"
			    "%llu,\"holders\":%llu,\"waiters\":%llu}",
			    s->capacity, (unsigned long long)s->used,
			    (unsigned long long)s->available,
			    (unsigned long long)s->holders,
			    (unsigned long long)s->waiters);
		} else if (n < 0)
			printf("name=%s capacity=%u used=%llu available=%llu "
			    "holders=%llu waiters=%llu", s->name, s->capacity,
			    (unsigned long long)s->used,
			    (unsigned long long)s->available,
			    (unsigned long long)s->holders,
			    (unsigned long long)s->waiters);
		else
			printf("%-24s %10u %10llu %10llu %8llu %8llu\n",
			    s->name, s->capacity, (unsigned long long)s->used,
			    (unsigned long long)s->available,
			    (unsigned long long)s->holders,
			    (unsigned long long)s->waiters);
	}
	if (cli->json && n >= 0)
		putchar(']');
	if (cli->json || n < 0)
		putchar('\n');
}

void
cli_out_check(struct cli *cli, const struct semc_check *chk)
{
	const char	*kind = chk->lease ? "lease" : "conn";

	if (cli->json)
		printf("{\"n\":%u,\"kind\":\"%s\",\"ttl_ms\":", chk->n, kind);
	else
		printf("n=%u kind=%s ttl_ms=", chk->n, kind);
	cli_out_ttl(cli, chk->ttl_ms);
	puts(cli->json ? "}" : "");
}

/* A label or address as JSON (null when "") or text ("-"). */
static void
cli_out_label(struct cli *cli, const char *s)
{
	if (cli->json && *s == '\0')
		fputs("null", stdout);
	else if (cli->json)
		cli_json_str(s);
	else
		fputs(*s == '\0' ? "-" : s, stdout);
}

/* The "name" and "addr" of a holder, waiter or client, for JSON. */
static void
cli_out_who(struct cli *cli, const char *name, const char *addr)
{
	fputs(",\"name\":", stdout);
	cli_out_label(cli, name);
	fputs(",\"addr\":", stdout);
	cli_out_label(cli, addr);
}

void
cli_out_holders(struct cli *cli, const struct semc_holder *h, size_t n)
{
	size_t	i;

	if (cli->json)
		putchar('[');
	else
		printf("%-20s %10s %-5s %10s %10s %-24s %s\n", "TOKEN", "N",
		    "KIND", "OWNER", "TTL_MS", "NAME", "ADDR");
	for (i = 0; i < n; i++) {
		const char *kind = h[i].lease ? "lease" : "conn";

		if (cli->json) {
			printf("%s{\"token\":%llu,\"n\":%u,\"kind\":\"%s\","
			    "\"owner\":", i > 0 ? "," : "",
			    (unsigned long long)h[i].token, h[i].n, kind);
			if (h[i].owner != 0)
				printf("%llu", (unsigned long long)h[i].owner);
			else
				fputs("null", stdout);
			fputs(",\"ttl_ms\":", stdout);
			cli_out_ttl(cli, h[i].ttl_ms);
			cli_out_who(cli, h[i].name, h[i].addr);
			putchar('}');
			continue;
		}
		printf("%-20llu %10u %-5s ", (unsigned long long)h[i].token,
		    h[i].n, kind);
		if (h[i].owner != 0)
			printf("%10llu ", (unsigned long long)h[i].owner);
		else
			printf("%10s ", "-");
		if (h[i].ttl_ms >= 0)
			printf("%10lld ", (long long)h[i].ttl_ms);
		else
			printf("%10s ", "-");
		printf("%-24s %s\n", *h[i].name != '\0' ? h[i].name : "-",
		    *h[i].addr != '\0' ? h[i].addr : "-");
	}
	if (cli->json)
		puts("]");
}

void
cli_out_waiters(struct cli *cli, const struct semc_waiter *w, size_t n)
{
	size_t	i;

	if (cli->json)
		putchar('[');
	else
		printf("%-4s %10s %12s %10s %-24s %s\n", "#", "N", "WAITED_MS",
		    "OWNER", "NAME", "ADDR");
	for (i = 0; i < n; i++) {
		if (cli->json) {
			printf("%s{\"n\":%u,\"waited_ms\":%llu,\"owner\":%llu",
			    i > 0 ? "," : "", w[i].n,
			    (unsigned long long)w[i].waited_ms,
			    (unsigned long long)w[i].owner);
			cli_out_who(cli, w[i].name, w[i].addr);
			putchar('}');
		} else
			printf("%-4zu %10u %12llu %10llu %-24s %s\n", i + 1,
			    w[i].n, (unsigned long long)w[i].waited_ms,
			    (unsigned long long)w[i].owner,
			    *w[i].name != '\0' ? w[i].name : "-",
			    *w[i].addr != '\0' ? w[i].addr : "-");
	}
	if (cli->json)
		puts("]");
}

/* CLIENTS: a table, or an array of objects. */
void
cli_out_clients(struct cli *cli, const struct semc_client *cl, size_t n)
{
	size_t	i;

	if (cli->json)
		putchar('[');
	else
		printf("%-8s %-22s %-24s %10s %10s %6s %7s %s\n", "ID", "ADDR",
		    "NAME", "AGE_MS", "IDLE_MS", "GRANTS", "WAITING", "CMD");
	for (i = 0; i < n; i++) {
		if (!cli->json) {
			printf("%-8llu %-22s %-24s %10llu %10llu %6llu %7s "
			    "%s\n", (unsigned long long)cl[i].id,
			    *cl[i].addr != '\0' ? cl[i].addr : "-",
			    *cl[i].name != '\0' ? cl[i].name : "-",
			    (unsigned long long)cl[i].age_ms,
			    (unsigned long long)cl[i].idle_ms,
			    (unsigned long long)cl[i].grants,
			    cl[i].waiting ? "yes" : "no",
			    *cl[i].cmd != '\0' ? cl[i].cmd : "-");
			continue;
		}
		printf("%s{\"id\":%llu", i > 0 ? "," : "",
		    (unsigned long long)cl[i].id);
		cli_out_who(cli, cl[i].name, cl[i].addr);
		printf(",\"age_ms\":%llu,\"idle_ms\":%llu,\"grants\":%llu,"
		    "\"waiting\":%s,\"cmd\":", (unsigned long long)cl[i].age_ms,
		    (unsigned long long)cl[i].idle_ms,
		    (unsigned long long)cl[i].grants,
		    cl[i].waiting ? "true" : "false");
		cli_out_label(cli, strcmp(cl[i].cmd, "-") == 0 ? "" :
		    cl[i].cmd);
		putchar('}');
	}
	if (cli->json)
		puts("]");
}

/* How a watched grant ended: the reason alone, or {"reason": ...}. */
void
cli_out_reason(struct cli *cli, enum semc_watch_reason reason)
{
	if (cli->json)
		printf("{\"reason\":\"%s\"}\n", semc_reasonname(reason));
	else
		printf("%s\n", semc_reasonname(reason));
}

/*
 * Every key=value the daemon sent, none filtered out (a later semd's keys
 * too): one a line (STATS), or all on one line (INFO, ROLE: oneline).
 * Numbers stay numbers in JSON; other values are strings.
 */
void
cli_out_kv(struct cli *cli, const struct semc_stat *s, size_t n,
    int oneline)
{
	size_t	i, digits;

	if (cli->json)
		putchar('{');
	for (i = 0; i < n; i++) {
		if (!cli->json) {
			printf("%s%s=%s%s", oneline && i > 0 ? " " : "",
			    s[i].key, s[i].value, oneline ? "" : "\n");
			continue;
		}
		printf("%s", i > 0 ? "," : "");
		cli_json_str(s[i].key);
		putchar(':');
		digits = strspn(s[i].value, "0123456789");
		if (digits > 0 && digits <= 15 && s[i].value[digits] == '\0' &&
		    (s[i].value[0] != '0' || digits == 1))
			fputs(s[i].value, stdout);
		else
			cli_json_str(s[i].value);
	}
	if (cli->json || oneline)
		puts(cli->json ? "}" : "");
}

/* Errors go to stderr; with --json, stdout gets {"error": ...} too. */
void
cli_out_error(struct cli *cli, enum semc_err err, const char *msg)
{
	const char	*name = semc_errname(err);
	char		 tail[64];
	size_t		 len;

	if (strncmp(name, "ERR_", 4) == 0)
		name += 4;
	fprintf(stderr, "semd-cli: %s\n", msg);
	/*
	 * From a pipe, stdout keeps one answer per command, as redis-cli:
	 * "(error) ERR NOSEM no semaphore 'x'" (the code once, in front).
	 */
	if (cli_errors_in_place && !cli->json) {
		snprintf(tail, sizeof(tail), " (ERR %s)", name);
		len = strlen(msg);
		if (len >= strlen(tail) &&
		    strcmp(msg + len - strlen(tail), tail) == 0)
			len -= strlen(tail);
		printf("(error) ERR %s %.*s\n", name, (int)len, msg);
	}
	if (cli->json) {
		printf("{\"error\":\"%s\",\"message\":", name);
		cli_json_str(msg);
		puts("}");
	}
}
