// The product version, in one place: the CLI, the Hub's meta and discovery all say it.
export const PRODUCT_VERSION = "0.1.0";
