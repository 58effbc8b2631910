/* SPDX-License-Identifier: MIT */
/* The bearer token file, read as a secret: one run of printable characters,
 * no byte of which ever goes into a message. The uploader and the config
 * check (config_files.c) read it through the same function.
 */
#include "upload_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/trust.h"

int fx_upload_read_token(const char *path, char **auth, size_t *token_off, char *err, size_t errlen)
{
	static const char prefix[] = "Authorization: Bearer ";
	static const struct fx_trust_rules rules = { .secret = true };
	const char *what = "upload.bearer_token_file";
	char buf[MAX_TOKEN_BYTES + 1];
	size_t len = 0, start = 0, end, i;
	ssize_t n;
	char *line;
	int fd, rc = 0;

	fd = fx_trust_open(AT_FDCWD, path, what, &rules, NULL, err, errlen);
	if (fd < 0)
		return fd;
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s '%s' cannot be read: %s", what, path,
				 strerror(-rc));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > MAX_TOKEN_BYTES) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s '%s' is more than %d bytes", what, path, MAX_TOKEN_BYTES);
		goto out;
	}
	end = len;
	while (start < end && strchr(" \t\r\n\v\f", buf[start]) && buf[start])
		start++;
	while (end > start && strchr(" \t\r\n\v\f", buf[end - 1]) && buf[end - 1])
		end--;
	if (start == end) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s '%s' is empty; it must hold the token", what, path);
		goto out;
	}
	/* Never a byte of the token in a message: only where the bad one is. */
	for (i = start; i < end; i++) {
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
			rc = -EINVAL;
			snprintf(err, errlen,
				 "%s '%s' has a space or a non-printable character at byte %zu; it "
				 "must hold one token",
				 what, path, i + 1);
			goto out;
		}
	}
	if (!auth)
		goto out;
	line = malloc(sizeof(prefix) + end - start);
	if (!line) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s '%s': out of memory", what, path);
		goto out;
	}
	memcpy(line, prefix, sizeof(prefix) - 1);
	memcpy(line + sizeof(prefix) - 1, buf + start, end - start);
	line[sizeof(prefix) - 1 + end - start] = '\0';
	*auth = line;
	*token_off = sizeof(prefix) - 1;
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}
