/*
 * fake_preload.c - an empty shared library that `recap run` can preload in
 * the command-line tests, standing in for librecap.so.
 */
int recap_cli_fake_preload_marker(void);

int recap_cli_fake_preload_marker(void)
{
    return 0;
}
