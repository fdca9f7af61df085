/*
 * conf_check.c - loads a configuration file with the real parser and
 * prints what it holds, so that the command-line tests can prove that what
 * `recap config` writes is accepted by librecap.
 *
 * Usage: conf_check FILE. Exit 0 and "ok ..." lines, or 1 and the error.
 */
#include <stdio.h>

#include "policy/config.h"
#include "policy/site.h"

int main(int argc, char **argv)
{
    struct conf_file conf;
    char err[1024];
    if (argc != 2) {
        fprintf(stderr, "usage: conf_check FILE\n");
        return 2;
    }
    if (conf_load(argv[1], &conf, err, sizeof err) != 0) {
        printf("%s\n", err);
        return 1;
    }
    printf("ok sites=%zu stack_depth=%d mode=%s\n", conf.nsites, conf.stack_depth,
           conf.has_mode ? conf_mode_name(conf.mode) : "-");
    for (size_t i = 0; i < conf.nsites; i++) {
        char id[SITE_ID_HEX_LEN + 1];
        site_id_format(conf.sites[i].id, id);
        printf("site %s label=%s mode=%s\n", id, conf.sites[i].label[0] ? conf.sites[i].label : "-",
               conf.sites[i].has_mode ? conf_mode_name(conf.sites[i].mode) : "-");
    }
    conf_free(&conf);
    return 0;
}
