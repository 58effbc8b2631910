/* SPDX-License-Identifier: MIT */
/* The bearer token file, read as a secret: one run of printable characters,
 * no byte of which ever goes into a message. The uploader and the config
 * check (config_files.c) read it through the same function.
 */
#include "upload_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/trust.h"

int fx_upload_read_token(const char *path, char **auth, size_t *token_off, char *err, size_t errlen)
{
	static const char prefix[] = "Authorization: Bearer ";
	char *tok = NULL, *line;
	size_t len = 0;
	int rc;

	rc = fx_trust_read_secret(path, "upload.bearer_token_file", MAX_TOKEN_BYTES,
				  auth ? &tok : NULL, &len, err, errlen);
	if (rc || !auth)
		return rc;
	line = malloc(sizeof(prefix) + len);
	if (line) {
		memcpy(line, prefix, sizeof(prefix) - 1);
		memcpy(line + sizeof(prefix) - 1, tok, len + 1);
		*auth = line;
		*token_off = sizeof(prefix) - 1;
	} else {
		rc = -ENOMEM;
		snprintf(err, errlen, "upload.bearer_token_file '%s': out of memory", path);
	}
	explicit_bzero(tok, len);
	free(tok);
	return rc;
}
