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

void
cli_out_holders(struct cli *cli, const struct semc_holder *h, size_t n)
{
	size_t	i;

	if (cli->json)
		putchar('[');
	else
		printf("%-20s %10s %-5s %10s %10s\n", "TOKEN", "N", "KIND",
		    "OWNER", "TTL_MS");
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
			printf("%10lld\n", (long long)h[i].ttl_ms);
		else
			printf("%10s\n", "-");
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
		printf("%-4s %10s %12s %10s\n", "#", "N", "WAITED_MS", "OWNER");
	for (i = 0; i < n; i++) {
		if (cli->json)
			printf("%s{\"n\":%u,\"waited_ms\":%llu,\"owner\":%llu}",
			    i > 0 ? "," : "", w[i].n,
			    (unsigned long long)w[i].waited_ms,
			    (unsigned long long)w[i].owner);
		else
			printf("%-4zu %10u %12llu %10llu\n", i + 1, w[i].n,
			    (unsigned long long)w[i].waited_ms,
			    (unsigned long long)w[i].owner);
	}
	if (cli->json)
		puts("]");
}

/* Numbers stay numbers in JSON; other values are strings. */
void
cli_out_stats(struct cli *cli, const struct semc_stat *s, size_t n)
{
	size_t	i, digits;

	if (cli->json)
		putchar('{');
	for (i = 0; i < n; i++) {
		if (!cli->json) {
			printf("%s=%s\n", s[i].key, s[i].value);
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
	if (cli->json)
		puts("}");
}

/* Errors go to stderr; with --json, stdout gets {"error": ...} too. */
void
cli_out_error(struct cli *cli, enum semc_err err, const char *msg)
{
	const char	*name = semc_errname(err);

	if (strncmp(name, "ERR_", 4) == 0)
		name += 4;
	fprintf(stderr, "semd-cli: %s\n", msg);
	if (cli->json) {
		printf("{\"error\":\"%s\",\"message\":", name);
		cli_json_str(msg);
		puts("}");
	}
}
