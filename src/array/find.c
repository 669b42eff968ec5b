/* find.c - an array's members found by its UUID: "tierfs:UUID" or
 * "UUID=UUID" as the source, as mdadm assembles by UUID from the devices
 * its DEVICE lines name.
 *
 * Owns: where members are looked for, and the order they are given in.
 *
 * Invariants:
 *  1. The places looked at are the search= option's patterns, else the
 *     "search PATTERN" lines of the configuration file (/etc/tierfs.conf;
 *     '#' starts a comment); each pattern is a glob(3) of directories.
 *     Without either, nothing is looked at, and the refusal says how to
 *     give them.
 *  2. A directory counts when its superblock names the UUID; members are
 *     given in their index order, and a second directory with an index
 *     already found is refused (two copies of one member: the
 *     administrator must choose), naming both.  Missing members are left
 *     to assembly, which decides whether the array runs without them.
 *  3. Nothing is changed and no member is locked here: assembly opens and
 *     checks what this finds, as for a list given by hand.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierfs/super.h"

const char *tfs_array_uuid_source(const char *src)
{
	const char *u = !strncmp(src, "tierfs:", 7) ? src + 7 : !strncmp(src, "UUID=", 5) ? src + 5
											   : NULL;

	if (!u || strlen(u) != 36)
		return NULL;
	for (int i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? u[i] != '-'
		    : !strchr("0123456789abcdef", u[i]))
			return NULL;
	return u;
}

/* Looks at every directory pattern matches; a member of uuid goes to
 * out[index].  Returns 0 or -EEXIST (err says which two). */
static int look(const char *pattern, const char *uuid, char **out, char *err, size_t errlen)
{
	glob_t g;
	int rc = 0;

	if (glob(pattern, GLOB_NOSORT | GLOB_ONLYDIR, NULL, &g))
		return 0;	/* no match is no member */
	for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
		struct tfs_super sb;
		const char *why;
		char real[PATH_MAX];
		int fd = open(g.gl_pathv[i], O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0)
			continue;
		if (tfs_super_read(fd, &sb, &why) == 0 && !strcmp(sb.uuid, uuid) &&
		    sb.index < TFS_MAX_MEMBERS && realpath(g.gl_pathv[i], real)) {
			if (out[sb.index] && strcmp(out[sb.index], real)) {
				snprintf(err, errlen, "array %s: %s and %s both say they are member %u: "
					 "name the members", uuid, out[sb.index], real, sb.index);
				rc = -EEXIST;
			} else if (!out[sb.index] && !(out[sb.index] = strdup(real))) {
				rc = -ENOMEM;
			}
		}
		close(fd);
	}
	globfree(&g);
	return rc;
}

int tfs_array_find(const char *uuid, const char *search, const char *conf, char **paths,
		   char *err, size_t errlen)
{
	char *out[TFS_MAX_MEMBERS] = { 0 }, line[PATH_MAX + 16];
	int rc = 0, n = 0;
	bool any = false;

	if (search) {
		char *list = strdup(search), *save = NULL;

		if (!list)
			return -ENOMEM;
		for (char *p = strtok_r(list, ":", &save); p && !rc; p = strtok_r(NULL, ":", &save)) {
			any = true;
			rc = look(p, uuid, out, err, errlen);
		}
		free(list);
	} else {
		FILE *f = fopen(conf, "re");

		while (f && !rc && fgets(line, sizeof(line), f)) {
			char pat[PATH_MAX + 1];

			line[strcspn(line, "#\n")] = 0;
			if (sscanf(line, " search %4096s", pat) == 1) {
				any = true;
				rc = look(pat, uuid, out, err, errlen);
			}
		}
		if (f)
			fclose(f);
	}
	if (rc == 0 && !any) {
		snprintf(err, errlen, "array %s: nowhere to look for its members: give -o "
			 "search=PATTERN[:PATTERN] or 'search PATTERN' lines in %s", uuid, conf);
		rc = -ENOENT;
	}
	for (int i = 0; i < TFS_MAX_MEMBERS; i++) {
		if (rc == 0 && out[i])
			paths[n++] = out[i];
		else
			free(out[i]);
	}
	if (rc == 0 && n == 0) {
		snprintf(err, errlen, "array %s: no member found in %s", uuid,
			 search ? search : conf);
		rc = -ENOENT;
	}
	return rc ? rc : n;
}
