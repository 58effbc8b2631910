/* SPDX-License-Identifier: MIT */
/* source_int.h: what the files of the source module share, and nobody else
 * sees (include/fxagent/source.h is the module's contract).
 *   source.c       fx_source_*: the kind picked from the spec, the listing
 *                  sorted; the path kind (a directory or one file)
 *   source_http.c  the http:// and https:// kind (nginx's JSON autoindex),
 *                  and the transfers the s3:// kind makes too
 *   source_s3.c    the s3:// kind: ListObjectsV2, narrowed by the key layout
 * Each kind is one struct src_ops; its own state embeds struct fx_source
 * first. Functions shared between these files are src_<verb>.
 */
#ifndef FXAGENT_SOURCE_INT_H
#define FXAGENT_SOURCE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "fxagent/s3.h"
#include "fxagent/source.h"

/* Entries (files and directories) one listing may visit: a tree or a server
 * gone wrong cannot grow the listing without end. */
#define SRC_MAX_ENTRIES 1000000u
/* Directories below the source's top; deeper ones are skipped. */
#define SRC_MAX_DEPTH 16u

/* A listing being built. */
struct src_list {
	struct fx_source_item *items;
	size_t n, cap;
	size_t seen;	 /* entries visited, against SRC_MAX_ENTRIES */
	const char *top; /* the source, for messages */
};

struct src_ops {
	/* Returns 0 with *out set, or -errno (logged). @o is never NULL. */
	int (*open)(const char *spec, const struct fx_source_opts *o, struct fx_source **out);
	/* Adds the chunk files to @l, in any order. Returns 0 or -errno (logged). */
	int (*list)(struct fx_source *s, struct src_list *l);
	int (*read_each)(struct fx_source *s, const struct fx_source_item *items, size_t n,
			 fx_source_read_fn cb, void *arg);
	void (*free)(struct fx_source *s);
};

struct fx_source {
	const struct src_ops *ops;
	const char *name; /* for messages: the path, or the URL without user:password@ */
};

extern const struct src_ops src_http_ops;
extern const struct src_ops src_s3_ops;

/* An HTTP source; an s3:// one is one too, its requests signed. */
struct src_http {
	struct fx_source base;	    /* first: the container is the same pointer */
	char *url;		    /* without user:password@; s3: the bucket's URL */
	char *user, *password;	    /* from the URL, or NULL */
	struct curl_slist *headers; /* the bearer token (s3: the payload hash, the
				       session token), or NULL */
	CURL *curl;		    /* for listings */
	bool dir;
	size_t parallel;       /* transfers at once, at most 16; 0: 4 */
	struct fx_s3_creds s3; /* s3: the credentials, else zero */
	char *s3_region;       /* s3: the region; NULL for http */
};

/* A response body, bounded. */
struct body {
	char *p; /* NUL-terminated (yajl wants it) */
	size_t len, cap, max;
	bool over, oom;
};

/* libcurl's global set-up, once. Returns 0 or -EIO (logged). */
int src_http_global_init(void);
/* Frees what @b holds and bounds it to @max bytes. */
void src_body_reset(struct body *b, size_t max);
/* Sets the options of one GET of @url into @b on @c (signed for s3).
 * Returns 0 or -errno (logged). */
int src_http_setup(const struct src_http *h, CURL *c, const char *url, struct body *b, char *errbuf,
		   void *priv);
/* The outcome of the transfer of @url on @c that ended with @rc: 0 for a
 * 2xx answer read whole, else -errno, logged with "cannot @verb '@url'" and,
 * for s3, the Code and Message of S3's answer (a warning that says ",
 * ignoring it" when @ignoring). */
int src_http_outcome(const struct src_http *h, CURL *c, CURLcode rc, const struct body *b,
		     const char *errbuf, const char *verb, const char *url, bool ignoring);
int src_http_read_each(struct fx_source *s, const struct fx_source_item *items, size_t n,
		       fx_source_read_fn cb, void *arg);
/* Reads @text (NUL-terminated; NULL: nothing came), the JSON listing of the
 * directory @url (nginx's autoindex_format json) @depth levels below the
 * source's top: its chunk files into @l as URLs under @url, its directories'
 * URLs into *@subs (*@nsubs of them, malloc'ed, the caller frees). Returns 0;
 * -EBADMSG with the reason in @why when it is no JSON array; -ENOMEM or
 * -EFBIG (logged) from @l. */
int src_http_take_listing(const char *text, const char *url, unsigned int depth, struct src_list *l,
			  char ***subs, size_t *nsubs, char *why, size_t whylen);

/* What a page of an S3 listing is read against: the source's key prefix,
 * where the bucket is (the objects' URLs) and the caller's filters. */
struct src_s3_scope {
	const char *prefix;
	const struct fx_s3_where *where;
	const struct fx_source_opts *o;
};

/* A page of a listing as read. */
struct src_s3_page {
	bool truncated;
	char *next; /* NextContinuationToken (xmlFree it), or NULL */
	bool past;  /* every later key of the target is past --to */
};

/* Reads the ListObjectsV2 page @xml (@len bytes) of s3://@shown: the keys
 * the scope may want into @l as their URLs, the CommonPrefixes into
 * @prefixes when it is not NULL (a listing with a delimiter). Returns 0;
 * -EBADMSG (logged) when it is no ListBucketResult; -ENOMEM or -EFBIG
 * (logged) from the lists. */
int src_s3_take_page(const struct src_s3_scope *sc, const char *xml, size_t len, const char *shown,
		     struct src_list *prefixes, struct src_list *l, struct src_s3_page *pg);
void src_http_free(struct fx_source *s);

/* A name the listing takes: ends in .json.gz or .json, is no temporary
 * (".tmp" anywhere) and no dot-file. */
bool src_is_chunk_name(const char *name);
/* A directory the walk does not enter: "rejected" and dot-directories. */
bool src_is_skipped_dir(const char *name);
/* Counts one entry visited. Returns 0, or -EFBIG (logged) past SRC_MAX_ENTRIES. */
int src_list_visit(struct src_list *l);
/* Adds @name (taken, freed on failure too). Returns 0 or -ENOMEM (logged). */
int src_list_add(struct src_list *l, char *name, int64_t size);

#endif
