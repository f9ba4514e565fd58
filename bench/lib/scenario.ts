// A benchmark scenario: a named module the runner can select, at full or quick sizes.
import type { Table } from "./report.ts";

export type RunOptions = {
  quick: boolean;
  /** Extra `loom hub` arguments for every Hub child (the store backend goes here). */
  hubArgs: string[];
};

export type Scenario = {
  name: string;
  /** One line for `npm run bench -- --help`. */
  summary: string;
  run: (o: RunOptions) => Promise<Table[]>;
};
