// Podman's pull progress lines (containers/image's report, as the libpod API streams it: never a terminal,
// so one plain line per step) turned into blob counts. The lines of one pull, in order:
//   Trying to pull host/team/app:1...
//   Getting image source signatures
//   Copying blob sha256:<digest>          once per layer, when its copy starts (several run in parallel)
//   Copying config sha256:<digest>        after every layer has been copied
//   Writing manifest to image destination
//   Storing signatures
// containers/image says when a blob starts but not when it ends, and never how many there will be, so the
// counts are: blobs started so far, and blobs done once the config or the manifest is being written.
import type { PullProgress } from '../ports/images.js';

const TRYING = /^Trying to pull /;
const BLOB = /^Copying blob (\S+)/;
const PAST_THE_LAYERS = /^(?:Copying config |Writing manifest|Storing signatures)/;

export class PullProgressCounter {
  private readonly blobs = new Set<string>();
  private layersCopied = false;

  /** The progress a line reports, counted with the lines before it. */
  next(line: string): PullProgress {
    const message = line.trim();
    if (TRYING.test(message)) {
      // A new attempt (another source, or a retry) copies from the start.
      this.blobs.clear();
      this.layersCopied = false;
    }
    const blob = BLOB.exec(message);
    if (blob) this.blobs.add(blob[1]!);
    if (PAST_THE_LAYERS.test(message)) this.layersCopied = true;
    return {
      message,
      blobsStarted: this.blobs.size,
      ...(this.layersCopied ? { blobsDone: this.blobs.size } : {}),
    };
  }
}
