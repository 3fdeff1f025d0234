/*
 * replay.c: run a fuzz harness over its corpus without libFuzzer, so that
 * `make check` re-checks every input ever saved (seeds and the inputs
 * that once crashed), with the normal compiler and sanitizer flags.
 *
 *   replay_NAME [FILE | DIR]...
 *
 * Without arguments it replays $SEMD_TESTS/fuzz/corpus/NAME (NAME is
 * FUZZ_NAME, given at build time). Each input is read into a buffer of
 * exactly its size, so that AddressSanitizer sees any read past it, and
 * passed to LLVMFuzzerTestOneInput(); each prints "ok - NAME: FILE". A
 * harness that finds a fault aborts, which fails the test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FUZZ_NAME
#error "build with -DFUZZ_NAME=\"name\""
#endif

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
	FILE		*fp;
	struct stat	 st;
	uint8_t		*buf;
	const char	*base;
	size_t		 size;

	if ((fp = fopen(path, "rb")) == NULL || fstat(fileno(fp), &st) != 0) {
		printf("FAIL - %s: %s: %s\n", FUZZ_NAME, path, strerror(errno));
		if (fp != NULL)
			fclose(fp);
		return (-1);
	}
	size = (size_t)st.st_size;
	/* malloc(0) may return NULL: keep one byte, pass size 0. */
	if ((buf = malloc(size > 0 ? size : 1)) == NULL ||
	    fread(buf, 1, size, fp) != size) {
		printf("FAIL - %s: %s: short read\n", FUZZ_NAME, path);
		free(buf);
		fclose(fp);
		return (-1);
	}
	fclose(fp);
	LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	base = strrchr(path, '/');
	printf("ok - %s: %s\n", FUZZ_NAME, base != NULL ? base + 1 : path);
	fflush(stdout);
	return (0);
}

static int
name_cmp(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

/* Replay every regular file of dir, in name order; the count, or -1. */
static int
replay_dir(const char *dir)
{
	DIR		*d;
	struct dirent	*de;
	char		**names = NULL, path[4096];
	size_t		 n = 0, i;
	int		 count = 0;

	if ((d = opendir(dir)) == NULL) {
		printf("FAIL - %s: %s: %s\n", FUZZ_NAME, dir, strerror(errno));
		return (-1);
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if ((names = realloc(names, (n + 1) * sizeof(*names))) == NULL ||
		    (names[n] = strdup(de->d_name)) == NULL)
			abort();
		n++;
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof(*names), name_cmp);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (count >= 0)
			count = replay_file(path) == 0 ? count + 1 : -1;
		free(names[i]);
	}
	free(names);
	return (count);
}

static int
replay_path(const char *path)
{
	struct stat	st;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return (replay_dir(path));
	return (replay_file(path) == 0 ? 1 : -1);
}

int
main(int argc, char **argv)
{
	const char	*tests = getenv("SEMD_TESTS");
	char		 dir[4096];
	int		 i, n, total = 0;

	if (argc < 2) {
		snprintf(dir, sizeof(dir), "%s/fuzz/corpus/%s",
		    tests != NULL ? tests : "tests", FUZZ_NAME);
		total = replay_path(dir);
	}
	for (i = 1; i < argc && total >= 0; i++) {
		n = replay_path(argv[i]);
		total = n < 0 ? -1 : total + n;
	}
	if (total <= 0) {
		if (total == 0)
			printf("FAIL - %s: no input to replay\n", FUZZ_NAME);
		return (EXIT_FAILURE);
	}
	printf("# %s: %d inputs replayed\n", FUZZ_NAME, total);
	return (EXIT_SUCCESS);
}
