import { defineConfig } from "vitest/config";

// `npm run dev` serves the UI with hot reload and sends the API's paths to
// a `sluice --serve` running on SLUICE_API (default 127.0.0.1:8080).
const api = process.env.SLUICE_API ?? "http://127.0.0.1:8080";

export default defineConfig({
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
  server: {
    proxy: {
      "/api": { target: api, changeOrigin: false },
      "/signin": { target: api, changeOrigin: false },
      "/metrics": { target: api, changeOrigin: false },
    },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
