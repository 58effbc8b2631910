// SPDX-License-Identifier: MIT
// C++ source of one ELF seed of fuzz_symbolize: namespaces, a class, a
// template and an inlined member, for mangled names and nested DIEs.
namespace fxseed
{
struct Counter {
	int n;
	inline __attribute__((always_inline)) int step(int x)
	{
		return n += x * 5;
	}
	__attribute__((noinline)) int run(int k);
};

int Counter::run(int k)
{
	for (int i = 0; i < k; i++)
		step(i);
	return n;
}

template <typename T> __attribute__((noinline)) T twice(T v)
{
	return v + v;
}
} // namespace fxseed

int fx_seed_cpp(int k)
{
	fxseed::Counter c{ 1 };

	return c.run(k) + fxseed::twice<int>(k) + (int)fxseed::twice<long>(k);
}
