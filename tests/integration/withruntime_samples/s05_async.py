"""python.md sample 5: AsyncRuntime, ten commands at once with asyncio.gather."""
import asyncio

from withruntime import AsyncRuntime


async def main():
    async with AsyncRuntime() as runtime:
        async with await runtime.sandboxes.create() as sbx:
            results = await asyncio.gather(*(sbx.exec(f"echo task {i}") for i in range(10)))
            for result in results:
                print(result.stdout, end="")
            assert [r.stdout for r in results] == [f"task {i}\n" for i in range(10)]
            assert all(r.exit_code == 0 for r in results)


asyncio.run(main())
