/* SPDX-License-Identifier: MIT */
/* upload.s3: chunks as objects of an S3 bucket. The request is the HTTP
 * sink's PUT with another URL (the chunk's key), the metadata headers named
 * x-amz-meta-fxagent-*, and libcurl's SigV4 over them and the body's
 * SHA-256. What differs after is the answer: S3 says why in an XML body
 * (Code, Message), and a 403 for a clock off by minutes says so.
 */
#include "upload_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fxagent/log.h"

/* S3 refuses a request signed more than 15 minutes from its clock. */
#define SKEW_LIMIT_S 900

void upl_s3_free(struct upl_s3 *s)
{
	if (!s)
		return;
	fx_s3_creds_wipe(&s->creds);
	free(s->endpoint);
	free(s->region);
	free(s->bucket);
	free(s->prefix);
	free(s->storage_class);
	free(s->labels);
	free(s->id_file);
	free(s->secret_file);
	free(s);
}

static int load_creds(struct upl_s3 *s, struct fx_s3_creds *c)
{
	char why[PATH_MAX + 256];
	int rc = fx_s3_creds_load(c, "upload.s3", s->id_file, s->secret_file, why, sizeof(why));

	if (rc)
		fx_err("%s", why);
	return rc;
}

int upl_s3_new(struct fx_uploader *u, const struct fx_upload_s3 *o)
{
	struct upl_s3 *s;
	char *url;
	int rc;

	if (!o->region || !o->bucket) {
		fx_err("upload.s3: %s is not set", o->region ? "bucket" : "region");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "upload.s3");
	rc = upl_dup_str(o->endpoint, &s->endpoint);
	if (!rc)
		rc = upl_dup_str(o->region, &s->region);
	if (!rc)
		rc = upl_dup_str(o->bucket, &s->bucket);
	if (!rc)
		rc = upl_dup_str(o->prefix ? o->prefix : "", &s->prefix);
	if (!rc)
		rc = upl_dup_str(o->storage_class, &s->storage_class);
	if (!rc)
		rc = upl_dup_str(o->labels, &s->labels);
	if (!rc)
		rc = upl_dup_str(o->access_key_id_file, &s->id_file);
	if (!rc)
		rc = upl_dup_str(o->secret_access_key_file, &s->secret_file);
	if (rc) {
		upl_s3_free(s);
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "upload.s3");
	}
	s->where = (struct fx_s3_where){ .endpoint = s->endpoint,
					 .region = s->region,
					 .bucket = s->bucket,
					 .path_style = o->path_style };
	url = fx_s3_url(&s->where, NULL, NULL);
	if (!url) {
		fx_err("upload.s3.endpoint '%s' is not an http:// or https:// URL of a host",
		       s->endpoint ? s->endpoint : "(default)");
		upl_s3_free(s);
		return -EINVAL;
	}
	free(url);
	rc = load_creds(s, &s->creds);
	if (rc) {
		upl_s3_free(s);
		return rc;
	}
	u->s3 = s;
	u->put = true;
	return 0;
}

int upl_s3_reload(struct fx_uploader *u)
{
	struct fx_s3_creds c;
	int rc = load_creds(u->s3, &c);

	if (rc)
		return rc;
	fx_s3_creds_wipe(&u->s3->creds);
	u->s3->creds = c;
	return 0;
}

int upl_s3_request(struct fx_uploader *u, const struct fx_chunk_info *info, const char *sha,
		   char **url, struct curl_slist **hdrs)
{
	char key[FX_S3_KEY_MAX + 1];
	int rc;

	*url = NULL;
	rc = fx_s3_chunk_key(u->s3->prefix, info, u->host, key, sizeof(key));
	if (rc)
		return rc;
	*url = fx_s3_url(&u->s3->where, key, NULL);
	if (!*url)
		return -ENOMEM;
	return fx_s3_sign(u->curl, &u->s3->creds, u->s3->region, sha, hdrs);
}

/* What the user can do about an S3 error @code. */
static const char *hint(const char *code)
{
	static const struct {
		const char *code, *hint;
	} hints[] = {
		{ "SignatureDoesNotMatch",
		  "the secret access key does not match the access key id" },
		{ "InvalidAccessKeyId", "the store knows no such access key id" },
		{ "AccessDenied", "these credentials may not write to this bucket" },
		{ "NoSuchBucket", "no such bucket: check upload.s3.bucket and endpoint" },
		{ "PermanentRedirect", "the bucket is in another region: check upload.s3.region" },
		{ "AuthorizationHeaderMalformed", "check upload.s3.region" },
		{ "InvalidStorageClass", "check upload.s3.storage_class" },
	};

	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		if (!strcmp(code, hints[i].code))
			return hints[i].hint;
	}
	return NULL;
}

void upl_s3_classify(struct fx_uploader *u, const char *shown, const char *body, size_t len,
		     int64_t retry_after_ms, time_t server_date, struct fx_upload_result *res)
{
	char code[64], msg[256], skew[200] = "";
	long st = res->status;
	const char *h;
	long long d;

	fx_s3_parse_error(body, len, code, sizeof(code), msg, sizeof(msg));
	/* The answer's XML is said in res->error, whole; the body is not. */
	res->body[0] = '\0';
	/* 5xx, 429, 408 and SlowDown (a 503): as any collector's. */
	if ((st >= 200 && st < 300) || st == 429 || st == 408 || st >= 500 || st < 200) {
		upl_classify_status(u, "PUT", shown, retry_after_ms, res);
		if (res->outcome == FX_UPLOAD_RETRY && code[0])
			upl_set_error(u, res, "PUT %s: HTTP %ld %s: %s", shown, st, code,
				      msg[0] ? msg : "no message");
		return;
	}
	res->outcome = FX_UPLOAD_REJECT;
	d = server_date > 0 ? (long long)(server_date - time(NULL)) : 0;
	if (!strcmp(code, "RequestTimeTooSkewed") || (st == 403 && llabs(d) > SKEW_LIMIT_S)) {
		if (server_date > 0)
			snprintf(skew, sizeof(skew),
				 "; the store's clock is %lld s %s this host's (S3 allows %d s): "
				 "set this host's clock (NTP)",
				 llabs(d), d > 0 ? "ahead of" : "behind", SKEW_LIMIT_S);
		else
			snprintf(skew, sizeof(skew),
				 "; this host's clock is off from the store's: set it (NTP)");
	}
	h = hint(code);
	upl_set_error(u, res, "PUT %s: HTTP %ld %s: %s%s%s%s%s", shown, st,
		      code[0] ? code : "(no S3 error code)", msg[0] ? msg : "no message",
		      h ? " (" : "", h ? h : "", h ? ")" : "", skew);
}

/* What --check-upload keeps of a HEAD's answer. */
struct head_answer {
	time_t date;
	char region[64];
};

static size_t on_head_header(char *data, size_t size, size_t nmemb, void *p)
{
	struct head_answer *a = p;
	size_t len = size * nmemb;
	time_t t = upl_parse_date_header(data, len);

	if (t != -1) {
		a->date = t;
	} else if (len > 20 && len < sizeof(a->region) + 20 &&
		   !strncasecmp(data, "x-amz-bucket-region:", 20)) {
		size_t n = len - 20;

		memcpy(a->region, data + 20, n);
		a->region[n] = '\0';
		/* trim the space before and the CRLF after */
		n = strcspn(a->region + strspn(a->region, " "), "\r\n");
		memmove(a->region, a->region + strspn(a->region, " "), n);
		a->region[n] = '\0';
	}
	return len;
}

int fx_upload_check(struct fx_uploader *u, char *msg, size_t len)
{
	struct head_answer a = { .date = -1 };
	struct curl_slist *hdrs = NULL;
	char shown[160];
	char *url = NULL;
	long st = 0;
	long long d;
	CURLcode rc;
	int ret;

	if (!u->s3) {
		snprintf(msg, len,
			 "--check-upload asks S3 stores only (upload.s3): a request "
			 "to a collector's URL would be a chunk");
		return -ENOTSUP;
	}
	url = fx_s3_url(&u->s3->where, NULL, NULL);
	ret = url ? fx_s3_sign(u->curl, &u->s3->creds, u->s3->region, NULL, &hdrs) : -ENOMEM;
	if (ret) {
		snprintf(msg, len, "out of memory");
		goto out;
	}
	upl_url_for_log(url, shown, sizeof(shown));
	u->errbuf[0] = '\0';
	rc = curl_easy_setopt(u->curl, CURLOPT_URL, url);
	if (!rc)
		rc = curl_easy_setopt(u->curl, CURLOPT_NOBODY, 1L);
	if (!rc)
		rc = curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, hdrs);
	if (!rc)
		rc = curl_easy_setopt(u->curl, CURLOPT_HEADERFUNCTION, on_head_header);
	if (!rc)
		rc = curl_easy_setopt(u->curl, CURLOPT_HEADERDATA, &a);
	if (!rc)
		rc = curl_easy_perform(u->curl);
	curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &st);
	/* The handle may send chunks after: nothing of this request stays. */
	curl_easy_setopt(u->curl, CURLOPT_NOBODY, 0L);
	curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(u->curl, CURLOPT_HEADERFUNCTION, NULL);
	curl_easy_setopt(u->curl, CURLOPT_HEADERDATA, NULL);
	if (rc) {
		snprintf(msg, len, "HEAD %s: no answer: %s", shown,
			 u->errbuf[0] ? u->errbuf : curl_easy_strerror(rc));
		ret = -EIO;
		goto out;
	}
	d = a.date > 0 ? (long long)(a.date - time(NULL)) : 0;
	if (st >= 200 && st < 300) {
		snprintf(msg, len,
			 "HEAD %s: HTTP %ld: the store accepts these credentials for "
			 "bucket %s",
			 shown, st, u->s3->bucket);
		ret = 0;
	} else if (st == 403) {
		char skew[96] = "";

		if (llabs(d) > SKEW_LIMIT_S)
			snprintf(skew, sizeof(skew),
				 "; and this host's clock is off by %lld s from the store's (set "
				 "it: NTP)",
				 llabs(d));
		snprintf(msg, len,
			 "HEAD %s: HTTP 403: the store refuses these credentials for bucket %s "
			 "(the access key id, the secret, or the bucket's policy)%s",
			 shown, u->s3->bucket, skew);
		ret = -EACCES;
	} else if (st == 404) {
		snprintf(msg, len, "HEAD %s: HTTP 404: no bucket %s at this endpoint", shown,
			 u->s3->bucket);
		ret = -ENOENT;
	} else if (st == 301 || a.region[0]) {
		snprintf(msg, len, "HEAD %s: HTTP %ld: bucket %s is in region %s, not %s", shown,
			 st, u->s3->bucket, a.region[0] ? a.region : "(not said)", u->s3->region);
		ret = -EXDEV;
	} else {
		snprintf(msg, len, "HEAD %s: HTTP %ld", shown, st);
		ret = -EIO;
	}
out:
	curl_slist_free_all(hdrs);
	free(url);
	return ret;
}
