/*
 * cmd_config.c — `kernbench config`: the resolved machine (or, with --ccl,
 * the resolved collective configuration) as YAML, after the files and
 * every --set; --diff: only what differs from the built-in one.
 *
 * The YAML is the text the results' configuration hash is computed over
 * (kb__topo_params_text, kb__ccl_config_text), nested by its dotted paths:
 * loaded back with --topology (or --ccl) it gives the same configuration,
 * so the same hash (docs/results.md). Defaults are written out too: the
 * file stands alone.
 *
 * Exit status: 0 success, 1 out of memory, 2 usage error or bad input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"

static void footer(FILE *f)
{
    fprintf(f, "The output loads back: kernbench run --topology OUT.yaml (or --ccl OUT.yaml)\n"
               "gives the same configuration hash as the options that printed it.\n\n"
               "exit status: 0 success, 1 out of memory, 2 usage error or invalid input\n");
}

static const kb__opt_spec config_table[] = {
    KB__OPTSPEC_TOPOLOGY,
    {"ccl", KB__ARG_OPT, 0, "FILE", "-",
     "print the collective configuration instead: FILE, or the\nbuilt-in configs/ccl.yaml "
     "('-' or no FILE)",
     NULL},
    KB__OPTSPEC_SET(" (ccl.KEY=VALUE: of the ccl configuration)"),
    {"diff", KB__ARG_NONE, 0, NULL, NULL,
     "only the values that differ from the built-in one, as\n\"path: built-in -> value\"", NULL},
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_config_spec = {
    "config", "Prints the resolved machine (or ccl) configuration as YAML.", config_table,
    sizeof config_table / sizeof config_table[0], footer};

/* ---- dotted lines -> nested YAML -------------------------------------------------- */

typedef struct node {
    char *name;
    const char *value; /* a leaf's value (borrowed from the text), NULL for a map */
    struct node **kids;
    size_t n, cap;
} node;

static void node_free(node *n)
{
    for (size_t i = 0; n && i < n->n; i++)
        node_free(n->kids[i]);
    if (n) free(n->kids), free(n->name), free(n);
}

static node *child(node *n, const char *name, size_t len)
{
    for (size_t i = 0; i < n->n; i++)
        if (strlen(n->kids[i]->name) == len && !strncmp(n->kids[i]->name, name, len))
            return n->kids[i];
    if (n->n == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 8;
        node **k = realloc(n->kids, cap * sizeof *k);
        if (!k) return NULL;
        n->kids = k;
        n->cap = cap;
    }
    node *c = calloc(1, sizeof *c);
    if (c && !(c->name = strndup(name, len))) free(c), c = NULL;
    if (c) n->kids[n->n++] = c;
    return c;
}

/* Adds "a.b.c=value" (the text is modified: '=' and '\n' become NULs). */
static int add_line(node *root, char *line)
{
    char *eq = strchr(line, '=');
    if (!eq) return 0;
    *eq = '\0';
    node *n = root;
    for (char *p = line; n;) {
        size_t len = strcspn(p, ".");
        n = child(n, p, len);
        if (!p[len]) break;
        p += len + 1;
    }
    if (!n) return KB_ENOMEM;
    n->value = eq + 1;
    return 0;
}

static void print_tree(FILE *f, const node *n, int depth)
{
    for (size_t i = 0; i < n->n; i++) {
        const node *k = n->kids[i];
        if (k->value)
            fprintf(f, "%*s%s: %s\n", 2 * depth, "", k->name, k->value);
        else {
            fprintf(f, "%*s%s:\n", 2 * depth, "", k->name);
            print_tree(f, k, depth + 1);
        }
    }
}

/* The ccl text's settings left at 0 mean "the machine's" or "every PE" and
 * are not written (the YAML has no way to say 0 for them). */
static int unwritable(const char *line)
{
    static const char *const zero[] = {".vc_chunk_size=0\n", ".credit_size=0\n", ".world_size=0\n"};
    size_t n = strcspn(line, "\n") + 1;
    for (size_t i = 0; i < 3; i++) {
        size_t z = strlen(zero[i]);
        if (n >= z && !strncmp(line + n - z, zero[i], z)) return 1;
    }
    return 0;
}

static int print_yaml(char *text, int ccl)
{
    node root = {0};
    int rc = 0;
    for (char *line = text, *next; !rc && line && *line; line = next) {
        next = strchr(line, '\n');
        int skip = ccl && unwritable(line);
        if (next) *next++ = '\0';
        if (!skip) rc = add_line(&root, line);
    }
    if (!rc) print_tree(stdout, &root, 0);
    for (size_t i = 0; i < root.n; i++)
        node_free(root.kids[i]);
    free(root.kids);
    return rc ? KB_CLI_FAIL : KB_CLI_OK;
}

/* ---- --diff --------------------------------------------------------------------------- */

/* The value of path in text ("path=value\n" lines), or NULL; *len its length. */
static const char *lookup(const char *text, const char *path, size_t plen, size_t *len)
{
    for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
        if (!strncmp(l, path, plen) && l[plen] == '=') {
            *len = strcspn(l + plen + 1, "\n");
            return l + plen + 1;
        }
    }
    return NULL;
}

static void print_diff(const char *builtin, const char *now)
{
    for (const char *l = now; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
        size_t plen = strcspn(l, "="), vlen = strcspn(l + plen + 1, "\n"), blen = 0;
        const char *b = lookup(builtin, l, plen, &blen);
        if (!b)
            printf("%.*s: (none) -> %.*s\n", (int)plen, l, (int)vlen, l + plen + 1);
        else if (blen != vlen || strncmp(b, l + plen + 1, vlen))
            printf("%.*s: %.*s -> %.*s\n", (int)plen, l, (int)blen, b, (int)vlen, l + plen + 1);
    }
    for (const char *l = builtin; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
        size_t plen = strcspn(l, "="), len;
        if (!lookup(now, l, plen, &len))
            printf("%.*s: %.*s -> (none)\n", (int)plen, l, (int)strcspn(l + plen + 1, "\n"),
                   l + plen + 1);
    }
}

/* ---- the command ----------------------------------------------------------------------- */

/* The resolved text of the options' configuration and of the built-in one. */
static int texts(const kb__cli_opts *o, int ccl, char **now, char **builtin)
{
    kb__err err;
    kb__err_clear(&err);
    int rc;
    if (ccl) {
        kb__ccl_config *c = NULL, *b = NULL;
        rc = kb__cli_load_ccl(o, &c);
        if (rc) return rc;
        rc = kb__ccl_config_text(c, now, &err);
        if (!rc) rc = kb__ccl_config_load(&b, NULL, NULL, 0, &err);
        if (!rc) rc = kb__ccl_config_text(b, builtin, &err);
        kb__ccl_config_destroy(c);
        kb__ccl_config_destroy(b);
    } else {
        kb__topo_params p, b;
        rc = kb__cli_load_params(o, &p);
        if (rc) return rc;
        kb__topo_params_default(&b);
        rc = kb__topo_params_text(&p, now, &err);
        if (!rc) rc = kb__topo_params_text(&b, builtin, &err);
    }
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench config: %s\n", err.msg);
    return KB_CLI_FAIL;
}

/* o and *ccl (--ccl given) from the parsed options a, checked: ccl.*
 * settings with --ccl only, one configuration at a time (not for --help).
 * 0 or KB_CLI_USAGE after the message. */
static int check_options(const kb__opt_vals *a, kb__cli_opts *o, int *ccl)
{
    kb__cli_opts_get(o, a);
    *ccl = kb__opt_given(a, "ccl") > 0;
    if (*ccl && !strcmp(o->ccl, "-")) o->ccl = NULL;
    if (!*ccl) o->takes_ccl = 0; /* ccl.* settings need --ccl here */
    if (o->help) return 0;
    for (size_t i = 0; i < o->n_sets; i++)
        if ((strncmp(o->sets[i], "ccl.", 4) == 0) != *ccl)
            return kb__opt_usage(&kb__cli_config_spec,
                                 *ccl ? "--set %s: with --ccl, only ccl.KEY=VALUE settings"
                                      : "--set %s: a ccl setting; add --ccl to print that "
                                        "configuration",
                                 o->sets[i]);
    if (*ccl && o->topology)
        return kb__opt_usage(&kb__cli_config_spec,
                             "--topology and --ccl: one configuration at a time");
    return 0;
}

int kb__cli_config_check(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_config_spec, argc, argv);
    if (rc) return rc;
    kb__cli_opts o;
    int ccl;
    rc = check_options(&a, &o, &ccl);
    kb__opt_fini(&a);
    return rc;
}

int kb__cli_config(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_config_spec, argc, argv);
    if (rc) return rc;
    kb__cli_opts o;
    int ccl;
    char *now = NULL, *builtin = NULL;
    rc = check_options(&a, &o, &ccl);
    if (rc)
        ;
    else if (o.help)
        kb__opt_help(stdout, &kb__cli_config_spec);
    else if (!(rc = texts(&o, ccl, &now, &builtin))) {
        if (kb__opt_given(&a, "diff"))
            print_diff(builtin, now);
        else
            rc = print_yaml(now, ccl);
    }
    free(now);
    free(builtin);
    kb__opt_fini(&a);
    return rc;
}
