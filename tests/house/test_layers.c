/*
 * The layers of src/: every folder includes only folders at or below it in
 * the order docs/architecture.md's layer table gives (read from the doc, so
 * the doc and the code cannot drift apart), no two folders include each
 * other, and every folder under src/ has a row in that table. The checker
 * is first run over a small tree written here, so a test that cannot fail
 * would be noticed.
 *
 * Only `#include "folder/..."` lines count (quoted includes of src/
 * folders); public headers (kernbench/...) and system headers belong to no
 * layer. Files in subfolders (src/ccl/algorithms/) belong to their top
 * folder.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/files.h"

#define MAX_LAYERS 64
#define NAME_MAX_  32

typedef struct layers {
    char name[MAX_LAYERS][NAME_MAX_];
    int n;
} layers;

typedef struct report {
    char text[16384];
    size_t len;
    int upward;                              /* includes of a folder above */
    int unknown;                             /* folders the table does not list */
    int edge[MAX_LAYERS][MAX_LAYERS];        /* edge[a][b]: a folder a file includes b */
    char where[MAX_LAYERS][MAX_LAYERS][160]; /* the first such include */
} report;

__attribute__((format(printf, 2, 3))) static void say(report *r, const char *fmt, ...)
{
    if (r->len >= sizeof r->text - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, ap);
    va_end(ap);
    if (w > 0) r->len += (size_t)w;
    if (r->len > sizeof r->text - 1) r->len = sizeof r->text - 1;
}

static int layer_of(const layers *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->name[i], name)) return i;
    return -1;
}

/* The table rows "| `src/NAME/` | ..." of the doc, in order. */
static void read_order(const char *doc_path, layers *l)
{
    size_t len;
    char *doc = kb_test_slurp(doc_path, &len);
    l->n = 0;
    for (char *line = doc; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        const char *p = line;
        while (*p == ' ')
            p++;
        if (!strncmp(p, "| `src/", 7)) {
            p += 7;
            size_t k = strcspn(p, "/`");
            cr_assert(k > 0 && k < NAME_MAX_ && l->n < MAX_LAYERS, "bad table row: %s", line);
            char name[NAME_MAX_];
            memcpy(name, p, k);
            name[k] = '\0';
            cr_assert_lt(layer_of(l, name), 0, "src/%s/ has two rows in %s", name, doc_path);
            memcpy(l->name[l->n++], name, k + 1);
        }
        line = next;
    }
    free(doc);
}

/* Records every quoted include of a src/ folder in file path of folder
 * `self` (index si). */
static void scan_file(const char *path, const char *rel, const layers *l, int si, report *r)
{
    size_t len;
    char *text = kb_test_slurp(path, &len);
    int lineno = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!strncmp(p, "#include", 8)) {
            p += 8;
            while (*p == ' ' || *p == '\t')
                p++;
            const char *slash = *p == '"' ? strchr(p + 1, '/') : NULL;
            const char *close = *p == '"' ? strchr(p + 1, '"') : NULL;
            if (slash && close && slash < close && slash - p - 1 < NAME_MAX_) {
                char dep[NAME_MAX_];
                memcpy(dep, p + 1, (size_t)(slash - p - 1));
                dep[slash - p - 1] = '\0';
                int di = layer_of(l, dep);
                if (di >= 0 && di != si) {
                    if (!r->edge[si][di])
                        snprintf(r->where[si][di], sizeof r->where[si][di], "%.120s:%d", rel,
                                 lineno);
                    r->edge[si][di] = 1;
                    if (di > si) {
                        r->upward++;
                        say(r, "%s:%d includes %s (src/%s/ is above it in the layer table)\n", rel,
                            lineno, p, dep);
                    }
                }
            }
        }
        line = next;
    }
    free(text);
}

static void scan_dir(const char *root, const char *rel, const layers *l, int si, report *r)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "cannot open %s", path);
    struct dirent *e;
    char names[256][256];
    int n = 0;
    while ((e = readdir(d)) && n < 256) {
        if (e->d_name[0] == '.') continue;
        snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char sub[1024], full[2048 + 64];
        snprintf(sub, sizeof sub, "%s/%s", rel, names[i]);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st)) continue;
        size_t k = strlen(names[i]);
        if (S_ISDIR(st.st_mode))
            scan_dir(root, sub, l, si, r);
        else if (k > 2 && names[i][k - 2] == '.' &&
                 (names[i][k - 1] == 'c' || names[i][k - 1] == 'h'))
            scan_file(full, sub, l, si, r);
    }
}

/* Checks the tree under root/src against the doc's order; the findings in
 * r (upward includes, folders the table lacks, folders including each
 * other: the return value counts the pairs). */
static int check_tree(const char *root, const char *doc, report *r)
{
    layers l;
    read_order(doc, &l);
    cr_assert(l.n > 0, "%s has no layer table rows (| `src/NAME/` | ...)", doc);
    memset(r, 0, sizeof *r);
    char src[1024];
    snprintf(src, sizeof src, "%s/src", root);
    DIR *d = opendir(src);
    cr_assert_not_null(d, "cannot open %s", src);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char full[2048];
        snprintf(full, sizeof full, "%s/%s", src, e->d_name);
        struct stat st;
        if (stat(full, &st) || !S_ISDIR(st.st_mode)) continue;
        int si = layer_of(&l, e->d_name);
        if (si < 0) {
            r->unknown++;
            say(r, "src/%s/ has no row in the layer table of %s\n", e->d_name, doc);
            continue;
        }
        char rel[300];
        snprintf(rel, sizeof rel, "src/%s", e->d_name);
        scan_dir(root, rel, &l, si, r);
    }
    closedir(d);
    int circles = 0;
    for (int a = 0; a < l.n; a++)
        for (int b = a + 1; b < l.n; b++)
            if (r->edge[a][b] && r->edge[b][a]) {
                circles++;
                say(r, "src/%s/ and src/%s/ include each other (%s and %s)\n", l.name[a], l.name[b],
                    r->where[a][b], r->where[b][a]);
            }
    return circles;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

Test(layers, checker_finds_upward_includes_and_circles)
{
    char root[] = "/tmp/kb_layers_XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    char p[512], doc[512];
    snprintf(doc, sizeof doc, "%s/arch.md", root);
    put(doc, "| layer | owns |\n|---|---|\n| `src/low/` | x |\n| `src/mid/` | y |\n"
             "| `src/top/` | z |\n");
    const char *dirs[] = {"src", "src/low", "src/mid", "src/top", "src/mid/sub"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        cr_assert_eq(mkdir(p, 0700), 0);
    }
    snprintf(p, sizeof p, "%s/src/low/a.c", root);
    put(p, "#include <stdio.h>\n#include \"low/a.h\"\n#include \"kernbench/x.h\"\n");
    snprintf(p, sizeof p, "%s/src/top/t.c", root);
    put(p, "#include \"mid/m.h\"\n#include \"low/a.h\"\n");
    snprintf(p, sizeof p, "%s/src/mid/sub/m.h", root);
    put(p, "  #include \"low/a.h\"\n");
    report *r = calloc(1, sizeof *r);
    cr_assert_eq(check_tree(root, doc, r), 0, "%s", r->text);
    cr_assert_eq(r->upward + r->unknown, 0, "%s", r->text);

    /* mid/sub/m.h reaching up into top: an upward include and a circle */
    put(p, "#include \"low/a.h\"\n#include \"top/t.h\"\n");
    cr_assert_eq(check_tree(root, doc, r), 1, "%s", r->text);
    cr_assert_eq(r->upward, 1, "%s", r->text);
    cr_assert_not_null(strstr(r->text, "src/mid/sub/m.h:2 includes \"top/t.h\""), "%s", r->text);
    cr_assert_not_null(strstr(r->text, "src/mid/ and src/top/ include each other"), "%s", r->text);

    /* a folder the table does not list */
    snprintf(p, sizeof p, "%s/src/stray", root);
    cr_assert_eq(mkdir(p, 0700), 0);
    check_tree(root, doc, r);
    cr_assert_eq(r->unknown, 1, "%s", r->text);
    free(r);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
}

Test(layers, src_follows_the_documented_order)
{
    report *r = calloc(1, sizeof *r);
    int circles = check_tree(KB_SOURCE_DIR, KB_SOURCE_DIR "/docs/architecture.md", r);
    cr_expect_eq(circles, 0, "folders that include each other:\n%s", r->text);
    cr_expect_eq(r->upward, 0, "upward includes:\n%s", r->text);
    cr_expect_eq(r->unknown, 0, "%s", r->text);
    free(r);
}
