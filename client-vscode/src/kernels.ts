/**
 * Which kernel a palette command acts on. The server already finds kernels (with Python's ast)
 * and puts an `accelopt.optimize [uri, kernelName]` code lens above each; the client reads
 * those lenses instead of parsing Python itself. Pure (no `vscode` import).
 */

/** The fields of a vscode.CodeLens used here. */
export interface LensLike {
  range: { start: { line: number } };
  command?: { command: string; arguments?: unknown[] };
}

/** A kernel of a file: its document URI (as the server wrote it), name and 0-based line. */
export interface KernelRef {
  uri: string;
  name: string;
  line: number;
}

/** Server commands whose code lenses name a kernel as `[uri, kernelName, ...]`. */
export const KERNEL_LENS_COMMANDS = ['accelopt.optimize', 'accelopt.profile', 'accelopt.showMemory', 'accelopt.showSearch'];

/** The kernels named by the server's code lenses, one per name, in line order. */
export function kernelsFromLenses(lenses: readonly LensLike[]): KernelRef[] {
  const byName = new Map<string, KernelRef>();
  for (const lens of lenses) {
    const cmd = lens.command;
    if (!cmd || !KERNEL_LENS_COMMANDS.includes(cmd.command)) {
      continue;
    }
    const [uri, name] = cmd.arguments ?? [];
    if (typeof uri !== 'string' || typeof name !== 'string' || !name) {
      continue;
    }
    const line = lens.range.start.line;
    const known = byName.get(name);
    if (!known || line < known.line) {
      byName.set(name, { uri, name, line });
    }
  }
  return [...byName.values()].sort((a, b) => a.line - b.line);
}

/**
 * The kernel the cursor (0-based line) is in: the only kernel, else the nearest one starting
 * at or above the cursor (a launcher below its kernel counts as that kernel), else undefined
 * (the caller asks the user).
 */
export function kernelAt(kernels: readonly KernelRef[], line: number): KernelRef | undefined {
  if (kernels.length === 1) {
    return kernels[0];
  }
  let best: KernelRef | undefined;
  for (const k of kernels) {
    if (k.line <= line) {
      best = k;
    }
  }
  return best;
}
