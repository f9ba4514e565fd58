// `loom get`'s columns are the shared ones, so they match the Hub's server-side Table.
export {
  campaignColumns,
  columnsFor,
  eventColumns,
  queueColumns,
  taskColumns,
  workerColumns,
} from "../resources/columns.ts";
