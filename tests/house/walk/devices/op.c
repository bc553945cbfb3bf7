int dev_gemm(int x);
int core_push(int (*fn)(int), int x);
int dev_kernel(int x);
int dev_kernel(int x)
{
	return x + 1;
}
int dev_gemm(int x)
{
	return core_push(dev_kernel, x);
}
