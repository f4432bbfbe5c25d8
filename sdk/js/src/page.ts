// A page of a listing: every list call of the SDK answers one (runtime,
// images, sandboxes share it; it depends on none of them).
/** One page of a growable list; `for await` walks every page. */
export class Page<T> implements AsyncIterable<T> {
  constructor(
    readonly data: T[],
    readonly nextCursor: string | null,
    private readonly fetchPage: (cursor: string) => Promise<Page<T>>,
  ) {}

  get hasMore(): boolean {
    return this.nextCursor !== null;
  }

  /** The next page, or null after the last. */
  async next(): Promise<Page<T> | null> {
    return this.nextCursor === null ? null : this.fetchPage(this.nextCursor);
  }

  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let page: Page<T> | null = this;
    while (page) {
      yield page;
      page = await page.next();
    }
  }

  async toArray(limit = 10_000): Promise<T[]> {
    const all: T[] = [];
    for await (const item of this) {
      if (all.length >= limit) break;
      all.push(item);
    }
    return all;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data;
  }
}
