// `import { Runtime } from "withruntime"`: the same module as `kiln`.
export * from "../dist/index.js";
