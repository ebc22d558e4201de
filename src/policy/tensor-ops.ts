import * as tf from '@tensorflow/tfjs';
import type { Tensor } from '../samples/safetensors.js';

/** Float32 values of a stored tensor (F32, or the half-precision dtypes GPU trainers write). */
export function floatValues(t: Tensor): Float32Array {
  if (t.dtype === 'F32') return t.data as Float32Array;
  if (t.dtype === 'BF16' || t.dtype === 'F16') {
    const half = t.data as Uint16Array;
    const out = new Float32Array(half.length);
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < half.length; i++) {
      const h = half[i] as number;
      if (t.dtype === 'BF16') bits[i] = h << 16;
      else out[i] = halfToFloat(h);
    }
    return out;
  }
  throw new Error(`weights of dtype ${t.dtype} are not supported; store them as F32, F16 or BF16`);
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/**
 * a @ b whose gradient uses explicit transposes: the default gradient multiplies with transpose
 * flags, which the wasm backend runs ~8× slower. Works on 2-D and on batched 4-D operands.
 */
export const matMul = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [x, y, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
  save([x, y]);
  const swap = (t: tf.Tensor) => (t.rank === 2 ? t.transpose() : t.transpose([0, 1, 3, 2]));
  return {
    value: tf.matMul(x, y),
    gradFunc: (dy, saved) => {
      const [sx, sy] = saved as [tf.Tensor, tf.Tensor];
      return [tf.matMul(dy, swap(sy)), tf.matMul(swap(sx), dy)];
    },
  };
}) as <T extends tf.Tensor>(a: tf.Tensor, b: tf.Tensor) => T;

/** Qwen3's RMSNorm: x / sqrt(mean(x²) + ε) · weight, over the last axis. */
export function rmsNorm(x: tf.Tensor, weight: tf.Tensor, eps: number): tf.Tensor {
  return x.mul(x.square().mean(-1, true).add(eps).rsqrt()).mul(weight);
}
