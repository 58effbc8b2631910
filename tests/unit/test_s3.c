/* SPDX-License-Identifier: MIT */
/* s3: the key layout a fleet's bucket is browsed by, the URLs signed, the
 * credentials (files and environment, no secret in a message) and what an
 * S3 error answer says. The requests themselves are checked against a real
 * store (radosgw) in integration.s3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/s3.h"

static char dir[] = "/tmp/fx-s3-XXXXXX";
static char err[1024];

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[64];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *put(const char *name, const char *text, mode_t mode)
{
	static char path[4][256];
	static int next;
	char *p = path[next++ % 4];
	int fd;

	snprintf(p, 256, "%s/%s", dir, name);
	unlink(p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	return p;
}

static void test_chunk_key_layout(void **state)
{
	struct fx_chunk_info info = { .start_ms = 1795663810250, /* 2026-11-26T03:30:10.250Z */
				      .end_ms = 1795663820250,
				      .seq = 7,
				      .id = "0123456789abcdef",
				      .target = "nginx" };
	struct fx_s3_key_parts p;
	char key[FX_S3_KEY_MAX + 1], hour[128];

	(void)state;
	assert_int_equal(fx_s3_chunk_key("fleet/", &info, "web-1.example", key, sizeof(key)), 0);
	assert_string_equal(key, "fleet/nginx/2026/11/26/03/web-1.example/"
				 "20261126T033010Z-20261126T033020Z-0123456789abcdef.json.gz");
	/* Taken apart again, after the prefix: what a listing narrows by. */
	assert_int_equal(fx_s3_parse_key(key + strlen("fleet/"), &p), 0);
	assert_string_equal(p.target, "nginx");
	assert_string_equal(p.host, "web-1.example");
	assert_int_equal(p.start_ms, 1795663810000);
	assert_int_equal(p.end_ms, 1795663820000);
	/* The hour a listing starts after is a prefix of the key. */
	assert_int_equal(fx_s3_hour_prefix("nginx", info.start_ms, hour, sizeof(hour)), 0);
	assert_string_equal(hour, "nginx/2026/11/26/03/");
	assert_non_null(strstr(key, hour));

	/* A host name with what a key segment must not hold. */
	assert_int_equal(fx_s3_chunk_key("", &info, "a/b c~d", key, sizeof(key)), 0);
	assert_non_null(strstr(key, "/03/a_b_c_d/"));
	assert_int_equal(fx_s3_parse_key(key, &p), 0);
	assert_string_equal(p.host, "a_b_c_d");

	/* Too long for S3 (1024 bytes): refused, not cut. */
	{
		char prefix[1100];

		memset(prefix, 'p', sizeof(prefix) - 1);
		prefix[sizeof(prefix) - 1] = '\0';
		assert_int_equal(fx_s3_chunk_key(prefix, &info, "h", key, sizeof(key)),
				 -ENAMETOOLONG);
	}
}

static void test_parse_key_refuses(void **state)
{
	static const char *const bad[] = {
		"",
		"nginx/2026/11/26/03/host",
		"nginx/2026/11/26/03/host/x.json.gz",
		"nginx/2026/11/26/03/host/20261126T033010Z-20261126T033020Z-id.json",
		"nginx/2026/11/26/03/host/2026112xT033010Z-20261126T033020Z-id.json.gz",
		"nginx/2026/11/26/03/host/20261126T033020Z-20261126T033010Z-id.json.gz",
		"nginx/2026/11/26/03/host/sub/20261126T033010Z-20261126T033020Z-id.json.gz",
		"/2026/11/26/03/host/20261126T033010Z-20261126T033020Z-id.json.gz",
	};
	struct fx_s3_key_parts p;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fx_s3_parse_key(bad[i], &p) != -EINVAL)
			fail_msg("parsed '%s'", bad[i]);
	}
}

static void test_urls(void **state)
{
	struct fx_s3_where w = { .endpoint = "http://127.0.0.1:7480",
				 .region = "us-east-1",
				 .bucket = "profiles",
				 .path_style = true };
	char q[256];
	char *u;

	(void)state;
	u = fx_s3_url(&w, "fleet/a b+c/x.json.gz", NULL);
	assert_string_equal(u, "http://127.0.0.1:7480/profiles/fleet/a%20b%2Bc/x.json.gz");
	free(u);
	assert_int_equal(fx_s3_query_escape("fleet/a b", q, sizeof(q)), 13);
	assert_string_equal(q, "fleet%2Fa%20b");
	u = fx_s3_url(&w, NULL, "list-type=2&prefix=fleet%2F");
	assert_string_equal(u, "http://127.0.0.1:7480/profiles/?list-type=2&prefix=fleet%2F");
	free(u);
	w.path_style = false;
	w.endpoint = "https://s3.example.com";
	u = fx_s3_url(&w, "k", NULL);
	assert_string_equal(u, "https://profiles.s3.example.com/k");
	free(u);
	/* AWS's own endpoint, from the region. */
	w.endpoint = NULL;
	w.region = "eu-west-1";
	u = fx_s3_url(&w, "k", NULL);
	assert_string_equal(u, "https://profiles.s3.eu-west-1.amazonaws.com/k");
	free(u);
	/* An IP address or localhost has no bucket.host: path style anyway. */
	w.endpoint = "http://127.0.0.1:9000";
	u = fx_s3_url(&w, "k", NULL);
	assert_string_equal(u, "http://127.0.0.1:9000/profiles/k");
	free(u);
	w.endpoint = "http://[::1]:9000";
	u = fx_s3_url(&w, "k", NULL);
	assert_string_equal(u, "http://[::1]:9000/profiles/k");
	free(u);
	w.endpoint = "http://LocalHost:9000";
	u = fx_s3_url(&w, NULL, "list-type=2");
	assert_string_equal(u, "http://LocalHost:9000/profiles/?list-type=2");
	free(u);
	/* a name that only starts like one is a name */
	w.endpoint = "http://127.0.0.1.nip.example";
	u = fx_s3_url(&w, "k", NULL);
	assert_string_equal(u, "http://profiles.127.0.0.1.nip.example/k");
	free(u);
	w.endpoint = "ftp://host";
	assert_null(fx_s3_url(&w, "k", NULL));
	assert_int_equal(fx_s3_query_escape("abc", q, 3), -ENAMETOOLONG);
}

static void test_parse_error(void **state)
{
	static const char full[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch"
		"</Code><Message>The request signature we calculated does not match\n the "
		"signature you provided.</Message><RequestId>tx0</RequestId></Error>";
	/* An entity is not expanded, and nothing outside is read. */
	static const char hostile[] =
		"<?xml version=\"1.0\"?><!DOCTYPE Error [<!ENTITY x SYSTEM "
		"\"file:///etc/hostname\"><!ENTITY y \"yyyyyyyyyyyy\">]><Error><Code>&x;&y;"
		"</Code></Error>";
	char code[64], msg[256];

	(void)state;
	fx_s3_parse_error(full, strlen(full), code, sizeof(code), msg, sizeof(msg));
	assert_string_equal(code, "SignatureDoesNotMatch");
	/* A newline in the message is a space: one line of log. */
	assert_string_equal(msg, "The request signature we calculated does not match  the "
				 "signature you provided.");
	/* Cut off in the Message: the Code is still said. */
	fx_s3_parse_error(full, 110, code, sizeof(code), msg, sizeof(msg));
	assert_string_equal(code, "SignatureDoesNotMatch");
	fx_s3_parse_error("not xml at all", 14, code, sizeof(code), msg, sizeof(msg));
	assert_string_equal(code, "");
	assert_string_equal(msg, "");
	fx_s3_parse_error("<Other><Code>X</Code></Other>", 29, code, sizeof(code), msg,
			  sizeof(msg));
	assert_string_equal(code, "");
	fx_s3_parse_error(hostile, strlen(hostile), code, sizeof(code), msg, sizeof(msg));
	assert_null(strstr(code, "yyyy"));
	{
		char host[256] = "";
		FILE *f = fopen("/etc/hostname", "r");

		if (f && fgets(host, sizeof(host), f))
			host[strcspn(host, "\n")] = '\0';
		if (f)
			fclose(f);
		if (host[0])
			assert_null(strstr(code, host));
	}
}

static void test_creds(void **state)
{
	struct fx_s3_creds c;
	const char *id, *secret;

	(void)state;
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	assert_int_equal(fx_s3_creds_load(&c, "upload.s3", NULL, NULL, err, sizeof(err)), -ENOKEY);
	assert_non_null(strstr(err, "upload.s3: no credentials"));
	assert_non_null(strstr(err, "AWS_ACCESS_KEY_ID is not set"));

	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
	assert_int_equal(fx_s3_creds_load(&c, "view", NULL, NULL, err, sizeof(err)), 0);
	assert_string_equal(c.key_id, "AKIDEXAMPLE");
	assert_null(c.token);
	fx_s3_creds_wipe(&c);
	setenv("AWS_SESSION_TOKEN", "tok en", 1);
	assert_int_equal(fx_s3_creds_load(&c, "view", NULL, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "AWS_SESSION_TOKEN has a space"));
	assert_null(strstr(err, "tok"));
	unsetenv("AWS_SESSION_TOKEN");

	/* Files win over the environment; both or neither. */
	id = put("id", "AKIDFILE\n", 0600);
	secret = put("secret", "  s3cr3t/+=  \n", 0600);
	assert_int_equal(fx_s3_creds_load(&c, "upload.s3", id, secret, err, sizeof(err)), 0);
	assert_string_equal(c.key_id, "AKIDFILE");
	assert_string_equal(c.secret, "s3cr3t/+=");
	fx_s3_creds_wipe(&c);
	assert_null(c.secret);
	assert_int_equal(fx_s3_creds_load(&c, "upload.s3", id, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "set both access_key_id_file and secret_access_key_file"));

	/* A secret others can read is refused, and said without its bytes. */
	secret = put("secret", "s3cr3t-readable", 0644);
	assert_int_equal(fx_s3_creds_load(&c, "upload.s3", id, secret, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "upload.s3.secret_access_key_file"));
	assert_null(strstr(err, "s3cr3t"));
	secret = put("secret", "s3cr3t with space", 0600);
	assert_int_equal(fx_s3_creds_load(&c, "upload.s3", id, secret, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "at byte 7"));
	assert_null(strstr(err, "s3cr3t"));
	secret = put("secret", "", 0600);
	assert_int_equal(fx_s3_creds_load(&c, "upload.s3", id, secret, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is empty"));
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
}

static void test_sha256_fd(void **state)
{
	char hex[65];
	int fd;

	(void)state;
	fd = open(put("abc", "abc", 0600), O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fx_s3_sha256_fd(fd, 3, hex), 0);
	assert_string_equal(hex,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* A file shorter than its size said: the chunk shrank under us. */
	assert_int_equal(fx_s3_sha256_fd(fd, 4, hex), -EIO);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunk_key_layout),
		cmocka_unit_test(test_parse_key_refuses),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_parse_error),
		cmocka_unit_test(test_creds),
		cmocka_unit_test(test_sha256_fd),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
