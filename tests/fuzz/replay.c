/* SPDX-License-Identifier: MIT */
/* Runs a fuzz target once over files, without libFuzzer: the normal (gcc,
 * sanitizer) builds replay the seed corpus and every saved crash this way.
 *
 *   fuzz_replay_<target> PATH...
 *
 * A directory stands for its files (sorted; names starting with "." and
 * README files skipped). Fails when no input was found at all; a broken
 * contract aborts inside the target, naming the check.
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* Each input in a buffer of exactly its size, as libFuzzer passes it: a read
 * past the end is a sanitizer report here too. */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t len;

	if (!f || fstat(fileno(f), &st) != 0) {
		fprintf(stderr, "replay: cannot open '%s': %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	len = (size_t)st.st_size;
	buf = malloc(len ? len : 1);
	if (!buf || fread(buf, 1, len, f) != len) {
		fprintf(stderr, "replay: cannot read '%s'\n", path);
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL, path[4096];
	size_t n = 0, cap = 0, i;
	int ret = 0;

	if (!d) {
		fprintf(stderr, "replay: cannot open '%s': %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || !strncmp(e->d_name, "README", 6))
			continue;
		if (n == cap) {
			char **p;

			cap = cap ? cap * 2 : 64;
			p = realloc(names, cap * sizeof(*p));
			if (!p) {
				ret = -1;
				break;
			}
			names = p;
		}
		names[n] = strdup(e->d_name);
		if (!names[n]) {
			ret = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (i = 0; i < n; i++) {
		if (!ret) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			ret = run_file(path);
			if (!ret)
				(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return ret;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	struct stat st;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE-OR-DIRECTORY...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: cannot read '%s': %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) : run_file(argv[i]))
			return 1;
		if (!S_ISDIR(st.st_mode))
			count++;
	}
	if (!count) {
		fprintf(stderr, "replay: no inputs found\n");
		return 1;
	}
	printf("replay: %zu inputs, every check held\n", count);
	return 0;
}
