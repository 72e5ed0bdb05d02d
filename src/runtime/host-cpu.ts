// How busy the host's CPUs have been, from the kernel's per-CPU time counters (os.cpus(), /proc/stat on
// Linux). The pool of pre-started engines refills only when the host had CPU to spare (core/pool).
import { cpus } from 'node:os';

export interface CpuReading {
  readonly busyMs: number;
  readonly totalMs: number;
}

export interface CpuMeter {
  read(): CpuReading;
  /** The fraction (0–1) of all CPUs' time that was busy since `reading`; 0 when no time passed. */
  busySince(reading: CpuReading): number;
}

function readHost(): CpuReading {
  let busyMs = 0;
  let totalMs = 0;
  for (const { times } of cpus()) {
    const all = times.user + times.nice + times.sys + times.idle + times.irq;
    busyMs += all - times.idle;
    totalMs += all;
  }
  return { busyMs, totalMs };
}

export const hostCpu: CpuMeter = {
  read: readHost,
  busySince(reading) {
    const now = readHost();
    const total = now.totalMs - reading.totalMs;
    return total > 0 ? (now.busyMs - reading.busyMs) / total : 0;
  },
};
