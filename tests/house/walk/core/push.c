/* tests/house/walk: a program in the library's layers for test-step-walk.sh */
int core_push(int (*fn)(int), int x);
int core_push(int (*fn)(int), int x)
{
	return fn(x);   /* an op run by the engine: a call up into a higher layer */
}
