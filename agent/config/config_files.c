/* SPDX-License-Identifier: MIT */
/* fx_config_check_files(): the paths of a parsed config against the disk, so
 * that "config OK" from --check-config means the agent starts, and a reload
 * that names a missing or hostile file is refused before anything reads it.
 * Files are opened through trust.c (no blocking on a FIFO, checks on the fd);
 * TLS files are parsed with OpenSSL, the library libcurl uses on Debian, so a
 * file curl would refuse at the first upload is refused here instead.
 */
#include "fxagent/config.h"
#include "fxagent/log.h"
#include "fxagent/s3.h"
#include "fxagent/trust.h"
#include "fxagent/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* A PEM key or certificate is a few KiB; a CA bundle (Debian's
 * ca-certificates.crt) a few hundred. */
#define PEM_MAX_BYTES (16u << 20)

/* OpenSSL's reason for a failed parse, in words a user can act on: a file
 * without the block asked for gets PEM's "no start line" or, for a key, a
 * decoder's "unsupported". @block is the label expected after
 * "-----BEGIN ". Empties the queue. */
static void ssl_reason(const char *block, char *buf, size_t len)
{
	unsigned long e, last = 0;
	bool no_start = false;

	while ((e = ERR_get_error()) != 0) {
		if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
			no_start = true;
		/* OpenSSL 3's key decoders found no key block at all. */
		if (ERR_GET_LIB(e) == ERR_LIB_OSSL_DECODER &&
		    ERR_GET_REASON(e) == ERR_R_UNSUPPORTED)
			no_start = true;
		last = e;
	}
	if (no_start || !last) {
		snprintf(buf, len, "no \"-----BEGIN %s-----\" block", block);
		return;
	}
	snprintf(buf, len, "OpenSSL: %s",
		 ERR_reason_error_string(last) ? ERR_reason_error_string(last) : "unknown error");
}

/* A passphrase prompt would read the terminal (or hang a service): there is
 * no passphrase to give, so an encrypted key is refused. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(int *)u = 1;
	return -1;
}

/* Parses what a BIO holds; sets *@encrypted when a passphrase was asked. */
typedef void *(*pem_reader)(BIO *b, int *encrypted);

static void *read_x509(BIO *b, int *encrypted)
{
	return PEM_read_bio_X509(b, NULL, no_passphrase, encrypted);
}

static void *read_key(BIO *b, int *encrypted)
{
	return PEM_read_bio_PrivateKey(b, NULL, no_passphrase, encrypted);
}

/* Every certificate of a CA bundle; NULL when none is found. */
static void *read_cas(BIO *b, int *encrypted)
{
	STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(b, NULL, no_passphrase, encrypted);
	int i, ncerts = 0;

	if (!infos)
		return NULL;
	for (i = 0; i < sk_X509_INFO_num(infos); i++)
		if (sk_X509_INFO_value(infos, i)->x509)
			ncerts++;
	if (!ncerts) {
		sk_X509_INFO_pop_free(infos, X509_INFO_free);
		return NULL;
	}
	return infos;
}

/* Opens @path (@what in messages) under @rules and parses it with @reader
 * into *@out; on failure a message says it is not @kind, and why. */
static int read_pem(const char *path, const char *what, const struct fx_trust_rules *rules,
		    pem_reader reader, const char *kind, const char *block, void **out, char *err,
		    size_t errlen)
{
	int fd, encrypted = 0, rc = 0;
	char why[160];
	BIO *b;

	fd = fx_trust_open(AT_FDCWD, path, what, rules, NULL, err, errlen);
	if (fd < 0)
		return fd;
	ERR_clear_error();
	b = BIO_new_fd(fd, BIO_NOCLOSE);
	*out = b ? reader(b, &encrypted) : NULL;
	if (!b) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s '%s': out of memory", what, path);
	} else if (!*out && encrypted) {
		rc = -EINVAL;
		snprintf(err, errlen,
			 "%s '%s' is encrypted and fxagent has no passphrase for it; store it "
			 "decrypted (openssl pkey -in '%s' -out NEW), readable only by the agent",
			 what, path, path);
	} else if (!*out) {
		rc = -EINVAL;
		ssl_reason(block, why, sizeof(why));
		snprintf(err, errlen, "%s '%s' is not %s (%s)", what, path, kind, why);
	}
	ERR_clear_error();
	BIO_free(b);
	close(fd);
	return rc;
}

/* ca_file, cert_file and key_file: each parses, and the key is the
 * certificate's. */
static int check_tls(const struct fx_config *c, char *err, size_t errlen)
{
	/* The CA file decides whom the agent trusts: nobody else may write it. */
	static const struct fx_trust_rules ca_rules = { .trusted = true,
							.max_size = PEM_MAX_BYTES };
	static const struct fx_trust_rules cert_rules = { .max_size = PEM_MAX_BYTES };
	static const struct fx_trust_rules key_rules = { .secret = true,
							 .max_size = PEM_MAX_BYTES };
	void *cas = NULL, *cert = NULL, *key = NULL;
	int rc = 0;

	if (c->upload.ca_file)
		rc = read_pem(c->upload.ca_file, "upload.ca_file", &ca_rules, read_cas,
			      "a file of PEM certificates", "CERTIFICATE", &cas, err, errlen);
	if (!rc && c->upload.cert_file)
		rc = read_pem(c->upload.cert_file, "upload.cert_file", &cert_rules, read_x509,
			      "a PEM certificate", "CERTIFICATE", &cert, err, errlen);
	if (!rc && c->upload.key_file)
		rc = read_pem(c->upload.key_file, "upload.key_file", &key_rules, read_key,
			      "a PEM private key", "PRIVATE KEY", &key, err, errlen);
	if (!rc && cert && key && X509_check_private_key(cert, key) != 1) {
		rc = -EINVAL;
		snprintf(err, errlen,
			 "upload.key_file '%s' is not the key of upload.cert_file '%s' (their "
			 "public keys differ)",
			 c->upload.key_file, c->upload.cert_file);
	}
	if (cas)
		sk_X509_INFO_pop_free(cas, X509_INFO_free);
	X509_free(cert);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return rc;
}

/* A debug directory may be missing (it is searched if it appears), but a
 * path that exists must be a directory. */
static int check_debug_dirs(const struct fx_config *c, char *err, size_t errlen)
{
	struct stat st;
	size_t i;

	for (i = 0; i < c->symbolization.ndebug_dirs; i++) {
		const char *d = c->symbolization.debug_dirs[i];

		if (stat(d, &st) < 0) {
			int e = errno;

			if (e == ENOENT) {
				fx_debug("symbolization.debug_dirs[%zu] '%s' does not exist, "
					 "ignoring",
					 i, d);
				continue;
			}
			snprintf(err, errlen,
				 "symbolization.debug_dirs[%zu] '%s' cannot be examined: %s", i, d,
				 strerror(e));
			return -e;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(err, errlen,
				 "symbolization.debug_dirs[%zu] '%s' is %s, not a directory", i, d,
				 fx_trust_kind(st.st_mode));
			return -ENOTDIR;
		}
	}
	return 0;
}

/* The metrics file is replaced by a rename in its directory: the directory
 * must be there, and what has the name must be a file, not a link to one. */
static int check_metrics(const char *path, char *err, size_t errlen)
{
	const char *what = "metrics.textfile";
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	struct stat st;
	size_t n = (size_t)(slash - path);

	if (n >= sizeof(dir)) {
		snprintf(err, errlen, "%s '%.64s...' is too long", what, path);
		return -ENAMETOOLONG;
	}
	memcpy(dir, path, n);
	dir[n ? n : 1] = '\0';
	if (!n)
		dir[0] = '/';
	if (stat(dir, &st) < 0) {
		int e = errno;

		if (e == ENOENT)
			snprintf(err, errlen, "%s '%s': its directory '%s' does not exist", what,
				 path, dir);
		else
			snprintf(err, errlen, "%s '%s': its directory '%s' cannot be examined: %s",
				 what, path, dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s '%s': '%s' is %s, not a directory", what, path, dir,
			 fx_trust_kind(st.st_mode));
		return -ENOTDIR;
	}
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s '%s' is %s, not a regular file%s", what, path,
			 fx_trust_kind(st.st_mode),
			 S_ISLNK(st.st_mode)
				 ? " (the agent replaces it by a rename; remove the link)"
				 : "");
		return -EINVAL;
	}
	return 0;
}

/* Whether debuginfod will be asked: servers in the config, or none named
 * there and some in DEBUGINFOD_URLS. */
static bool debuginfod_on(const struct fx_config *c)
{
	const char *u = c->symbolization.debuginfod_urls;

	if (!u)
		u = getenv("DEBUGINFOD_URLS");
	return u && u[strspn(u, " ")] && c->symbolization.debuginfod_cache;
}

int fx_config_check_files(const struct fx_config *c, char *err, size_t errlen)
{
	int rc = 0;

	if (c->upload.bearer_token_file)
		rc = fx_upload_read_token(c->upload.bearer_token_file, NULL, NULL, err, errlen);
	if (!rc && c->upload.s3.bucket) {
		struct fx_s3_creds cr;

		rc = fx_s3_creds_load(&cr, "upload.s3", c->upload.s3.access_key_id_file,
				      c->upload.s3.secret_access_key_file, err, errlen);
		if (!rc)
			fx_s3_creds_wipe(&cr);
	}
	if (!rc)
		rc = check_tls(c, err, errlen);
	if (!rc)
		rc = check_debug_dirs(c, err, errlen);
	if (!rc && c->output.directory)
		rc = fx_trust_dir(c->output.directory, "output.directory", false, err, errlen);
	/* Without a url nothing is spooled, and the spool is never made. */
	if (!rc && fx_config_uploads(c) && c->spool.directory)
		rc = fx_trust_dir(c->spool.directory, "spool.directory", false, err, errlen);
	if (!rc && c->metrics.textfile)
		rc = check_metrics(c->metrics.textfile, err, errlen);
	/* The cache is made only when there are servers to ask. */
	if (!rc && debuginfod_on(c))
		rc = fx_trust_dir(c->symbolization.debuginfod_cache,
				  "symbolization.debuginfod_cache", false, err, errlen);
	return rc;
}
